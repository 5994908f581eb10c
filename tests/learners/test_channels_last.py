"""`clients.channels_last=true` on CPU: an epoch's small last batch trains in the default layout
(issue 37: torch 2.13.0's CPU channels-last backward of a 1x1 stride-2 convolution was reported
to abort the process at batch size 3), and a CIFAR-10 CPU round completes."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from cosmosfl import TorchLearner
from cosmosfl.models import build_model


def learner(channels_last):
    net = build_model("resnet8", in_channels=3, num_classes=10, image_size=32, width=0.5, seed=0)
    return TorchLearner(net, seed=0, channels_last=channels_last)


def test_a_last_batch_of_three_trains_and_matches_the_default_layout():
    rng = np.random.default_rng(0)
    x = rng.random((35, 32, 32, 3), dtype=np.float32).transpose(0, 3, 1, 2).copy()  # 32 + 3
    y = rng.integers(0, 10, 35)
    nhwc, nchw = learner(True), learner(False)
    for lrn in (nhwc, nchw):
        lrn.fit(x, y, epochs=2)
        lrn.distill(x, np.full((35, 10), 0.1, np.float32), epochs=1, lam=5.0)
    conv = next(m for m in nhwc.model.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)  # back after the step
    # Same training up to rounding (the layouts round differently; Adam carries it along).
    np.testing.assert_allclose(nhwc.predict_proba(x), nchw.predict_proba(x), atol=5e-3)


@pytest.mark.slow
@pytest.mark.data
def test_a_cifar10_cpu_round_completes_with_channels_last(tmp_path, request):
    """The reported command (serial, as reported), in a subprocess: a heap corruption would
    kill the test run."""
    root = Path(request.config.rootpath)
    data = Path(os.environ.get("COSMOSFL_DATA_DIR", root.parent / "shared" / "data"))
    if not (data / "cifar10_jpeg.npz").is_file():
        pytest.skip(f"no CIFAR-10 in {data}")
    cosmosfl = str(Path(sys.executable).with_name("cosmosfl"))
    proc = subprocess.run(
        [cosmosfl, "run", "-c", str(root / "configs" / "cifar10-cpu.yaml"),
         f"data.data_dir={data}", "clients.channels_last=true", "rounds=1", "workers=1",
         "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "run" / "summary.json").is_file()
