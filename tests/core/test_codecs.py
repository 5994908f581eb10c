"""Payload codecs: round trips, exact byte counts, rejection of malformed payloads, and COSMOS
running end to end with a lossy codec."""

import numpy as np
import pytest

from cosmosfl.core import codecs as C
from cosmosfl.core import protocol
from cosmosfl.engines.simulation import ClientRejectedWarning

N, M = 50, 10
CTX = {"n": N, "m": M}


def probs(seed=0, n=N, m=M):
    return np.random.default_rng(seed).dirichlet(np.full(m, 0.3), n).astype(np.float32)


def roundtrip(p, codec):
    enc = C.encode_probs(p, codec)
    return enc, C.decode_arrays(enc, CTX, client_id=3, task=protocol.PREDICT_PUBLIC)["probs"]


@pytest.mark.parametrize(
    ("codec", "nbytes", "atol"),
    [
        ("float32", N * M * 4, 0.0),
        ("float16", N * M * 2, 5e-4),
        ("uint8", N * M * 1, 1.0 / 255),
        ("top10", N * M * (1 + 2), 5e-4),
    ],
)
def test_roundtrip_error_and_bytes(codec, nbytes, atol):
    p = probs()
    enc, dec = roundtrip(p, codec)
    assert sum(a.nbytes for a in enc.values()) == nbytes
    assert dec.shape == (N, M)
    assert np.abs(dec.astype(np.float64) - p).max() <= atol + 1e-7
    # The decoded payload passes the protocol's checks (simplex rows).
    protocol.validate_array(
        "probs", dec, protocol.PROBS, CTX, client_id=3, task=protocol.PREDICT_PUBLIC
    )


def test_uint8_rows_sum_to_exactly_255():
    q = C.quantize_rows(probs(1))
    assert q.dtype == np.uint8
    assert (q.sum(axis=1, dtype=np.int64) == 255).all()


def test_top_k_keeps_the_k_largest_and_spreads_the_rest():
    p = np.array([[0.5, 0.3, 0.1, 0.1], [0.05, 0.05, 0.2, 0.7]], np.float32)
    enc = C.encode_probs(p, "top2")
    assert enc["probs.top_idx"].dtype == np.uint8 and enc["probs.top_val"].dtype == np.float16
    assert sum(a.nbytes for a in enc.values()) == 2 * 2 * (1 + 2)
    dec = C.decode_arrays(enc, {"n": 2, "m": 4}, client_id=0, task=protocol.PREDICT_PUBLIC)["probs"]
    np.testing.assert_allclose(dec[0], [0.5, 0.3, 0.1, 0.1], atol=1e-3)
    np.testing.assert_allclose(dec[1], [0.05, 0.05, 0.2, 0.7], atol=1e-3)
    assert (dec.argmax(axis=1) == p.argmax(axis=1)).all()


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda e: e["probs.uint8"].__setitem__((0, 0), 0), "sums to"),
        (lambda e: e.__setitem__("probs.uint8", e["probs.uint8"].astype(np.int16)), "dtype"),
        (lambda e: e.__setitem__("probs.uint8", e["probs.uint8"][:-1]), "shape"),
    ],
)
def test_bad_uint8_payload_rejected(mutate, reason):
    enc = C.encode_probs(probs(), "uint8")
    mutate(enc)
    with pytest.raises(protocol.PayloadError, match=reason) as err:
        C.decode_arrays(enc, CTX, client_id=4, task=protocol.PREDICT_PUBLIC)
    assert err.value.client_id == 4


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda e: e["probs.top_idx"].__setitem__((0, 0), M), "class indices"),
        (lambda e: e["probs.top_idx"].__setitem__((0, 1), e["probs.top_idx"][0, 0]), "twice"),
        (lambda e: e["probs.top_val"].__setitem__((1, 0), -0.5), "finite and >= 0"),
        (lambda e: e["probs.top_val"].__setitem__((1, 0), np.nan), "finite and >= 0"),
        (lambda e: e["probs.top_val"].__setitem__((1, slice(None)), 0.9), "sum to"),
        (lambda e: e.pop("probs.top_val"), "without its values"),
        (lambda e: e.pop("probs.top_idx"), "without its class indices"),
    ],
)
def test_bad_top_k_payload_rejected(mutate, reason):
    enc = C.encode_probs(probs(), "top2")
    mutate(enc)
    with pytest.raises(protocol.PayloadError, match=reason):
        C.decode_arrays(enc, CTX, client_id=4, task=protocol.PREDICT_PUBLIC)


def test_unknown_codec_names_the_allowed_ones():
    for bad in ("int4", "top0", "topk", ""):
        with pytest.raises(ValueError, match="top<k>"):
            C.check_codec(bad)


def test_decode_reply_leaves_plain_and_error_replies_alone():
    plain = protocol.Reply(protocol.PREDICT_PUBLIC, arrays={"probs": probs()})
    assert C.decode_reply(plain, CTX, client_id=0, task=protocol.PREDICT_PUBLIC) is plain
    failed = protocol.Reply(protocol.PREDICT_PUBLIC, error="boom")
    assert C.decode_reply(failed, CTX, client_id=0, task=protocol.PREDICT_PUBLIC) is failed


def test_cosmos_with_codecs_counts_encoded_bytes_and_rejects_corrupt_clients():
    from sklearn.linear_model import LogisticRegression

    from cosmosfl import Client, Cosmos, SklearnLearner, simulate

    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 1, 8, 8)).astype(np.float32)
    y = (x[:, 0, 0, 0] > 0).astype(np.int64) + 2 * (x[:, 0, 0, 1] > 0)
    public = rng.normal(size=(30, 1, 8, 8)).astype(np.float32)

    def clients(corrupt=False):
        out = [
            Client(
                i, SklearnLearner(LogisticRegression(max_iter=200), num_classes=4), (x, y), (x, y)
            )
            for i in range(4)
        ]
        if corrupt:  # client 2 sends a quantised payload whose rows do not add up
            handle = out[2].handle

            def bad(message, handle=handle):
                reply = handle(message)
                if "probs.uint8" in reply.arrays:
                    reply.arrays["probs.uint8"][0, :] = 0
                return reply

            out[2].handle = bad
        return out

    def run(codec, corrupt=False):
        algo = Cosmos(
            target_clusters=2,
            codec=codec,
            server_model="mlp",
            server_epochs=1,
            distill_epochs=1,
            pretrain_epochs=1,
        )
        # A corrupted reply is a client's fault: left out of the step with a warning.
        return simulate(algo, clients(corrupt), public, rounds=1, seed=1, strict=not corrupt)

    ref, lossy = run("float32"), run("uint8")
    n = len(public)
    assert set(ref.records[0]["bytes_up"].values()) == {n * 4 * 4}
    assert set(lossy.records[0]["bytes_up"].values()) == {n * 4}
    assert set(lossy.records[0]["bytes_down"].values()) == {n * 4}
    with pytest.warns(ClientRejectedWarning, match="client 2's reply"):
        corrupt = run("uint8", corrupt=True).records[0]
    assert [r["client"] for r in corrupt["rejected"]] == [2]
    assert "sums to" in corrupt["rejected"][0]["reason"]
