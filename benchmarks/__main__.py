"""python -m benchmarks NAME [...]  (same as `cosmosfl bench NAME`)."""

import sys

from cosmosfl.bench import main

sys.exit(main())
