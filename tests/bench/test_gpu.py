"""The GPU benchmark (bench/gpu.py) needs a CUDA device unless --quick."""

import torch


def test_bench_gpu_needs_cuda_unless_quick(monkeypatch, capsys):
    from cosmosfl.cli.main import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["bench", "gpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs a CUDA device" in err[0] and "--quick" in err[0]
