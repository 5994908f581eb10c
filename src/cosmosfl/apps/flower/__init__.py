"""cosmosfl on Flower: the apps a Flower deployment runs (`pip install 'cosmosfl[flower]'`).

- `server_app:app` / `client_app:app`: the ServerApp and ClientApp a Flower app's
  pyproject.toml points at (see `cosmosfl flower app` and docs/flower.md);
- `app`: writes that pyproject.toml; `settings`: its run-config keys;
- `simulate_on_flower` (`simulation`): a config on Flower's simulation runtime, from Python;
- `launch`: a local deployment (own SuperLink and SuperNodes) for testing; `certs`: its TLS
  material.

They build experiments from configs and write run directories, so they sit above the
experiment layer; the engine they drive (`FlowerFederation`) is `cosmosfl.engines.flower`.
Submodules import flwr; this package itself does not.
"""
