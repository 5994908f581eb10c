import numpy as np
import pytest

from cosmosfl.core import protocol

CTX = {"n": 4, "m": 3}


def probs(n=4, m=3, dtype=np.float32):
    return np.full((n, m), 1.0 / m, dtype=dtype)


def check(arr, spec=protocol.PROBS):
    return protocol.validate_array(
        "probs", arr, spec, CTX, client_id=7, task=protocol.PREDICT_PUBLIC
    )


def test_valid_probabilities_pass_unchanged():
    a = probs()
    assert check(a) is a
    assert check(probs(dtype=np.float16)).dtype == np.float16


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda a: a.__setitem__((0, 0), np.nan), "non-finite"),
        (lambda a: a.__setitem__((1, 2), np.inf), "non-finite"),
        (lambda a: a.__setitem__((0, slice(None)), [1.5, -0.5, 0.0]), "negative"),
        (lambda a: a.__setitem__((2, slice(None)), [0.5, 0.5, 0.5]), "sum to 1"),
    ],
)
def test_bad_values_rejected_with_client_and_reason(mutate, reason):
    a = probs()
    mutate(a)
    with pytest.raises(protocol.PayloadError, match=reason) as err:
        check(a)
    assert err.value.client_id == 7
    assert "client 7" in str(err.value)


@pytest.mark.parametrize("shape", [(4,), (3, 3), (4, 4), (4, 3, 1)])
def test_wrong_shape_rejected(shape):
    a = np.full(shape, 1.0 / shape[-1], dtype=np.float32)
    with pytest.raises(protocol.PayloadError, match="shape"):
        check(a)


@pytest.mark.parametrize("dtype", [np.int64, np.bool_, np.complex64, object])
def test_wrong_dtype_rejected(dtype):
    a = np.zeros((4, 3), dtype=dtype)
    with pytest.raises(protocol.PayloadError, match="dtype"):
        check(a)


def test_not_an_array_empty_and_oversized():
    with pytest.raises(protocol.PayloadError, match="numpy array"):
        check([[1.0, 0, 0]] * 4)
    empty_ctx = {"n": 0, "m": 3}
    with pytest.raises(protocol.PayloadError, match="empty"):
        protocol.validate_array(
            "p", np.zeros((0, 3), np.float32), protocol.PROBS, empty_ctx, client_id=1, task="t"
        )
    with pytest.raises(protocol.PayloadError, match="exceeds"):
        protocol.validate_array(
            "p", probs(), protocol.PROBS, CTX, client_id=1, task="t", max_bytes=10
        )


def test_labels_spec():
    spec = protocol.ArraySpec(("n",), kind="labels")
    assert check(np.array([0, 1, 2, 0]), spec).shape == (4,)
    with pytest.raises(protocol.PayloadError, match=r"\[0, 3\)"):
        check(np.array([0, 1, 3, 0]), spec)
    with pytest.raises(protocol.PayloadError, match="integer"):
        check(np.zeros(4, np.float32), spec)


def test_validate_reply_checks_task_error_arrays_and_metrics():
    ok = protocol.Reply(protocol.PREDICT_PUBLIC, arrays={"probs": probs()})
    assert (
        protocol.validate_reply(
            ok,
            protocol.REPLY_SPECS[protocol.PREDICT_PUBLIC],
            CTX,
            client_id=1,
            task=protocol.PREDICT_PUBLIC,
        )
        is ok
    )
    spec = protocol.REPLY_SPECS[protocol.PREDICT_PUBLIC]
    with pytest.raises(protocol.PayloadError, match="missing"):
        protocol.validate_reply(
            protocol.Reply(protocol.PREDICT_PUBLIC),
            spec,
            CTX,
            client_id=1,
            task=protocol.PREDICT_PUBLIC,
        )
    with pytest.raises(protocol.PayloadError, match="unexpected"):
        protocol.validate_reply(
            protocol.Reply(protocol.PREDICT_PUBLIC, arrays={"probs": probs(), "w": probs()}),
            spec,
            CTX,
            client_id=1,
            task=protocol.PREDICT_PUBLIC,
        )
    with pytest.raises(protocol.PayloadError, match="reported an error: boom"):
        protocol.validate_reply(
            protocol.Reply(protocol.PREDICT_PUBLIC, error="boom"),
            spec,
            CTX,
            client_id=1,
            task=protocol.PREDICT_PUBLIC,
        )
    with pytest.raises(protocol.PayloadError, match="for task"):
        protocol.validate_reply(
            protocol.Reply(protocol.DISTILL), {}, CTX, client_id=1, task=protocol.PREDICT_PUBLIC
        )
    with pytest.raises(protocol.PayloadError, match="metric"):
        protocol.validate_reply(
            protocol.Reply(protocol.EVALUATE, metrics={"top1": float("nan")}),
            {},
            CTX,
            client_id=1,
            task=protocol.EVALUATE,
        )


def test_byte_accounting_counts_array_payload():
    m = protocol.Message(protocol.DISTILL, {"epochs": 1}, {"targets": probs(100, 10)})
    assert protocol.message_bytes(m) == 100 * 10 * 4
    assert protocol.message_bytes(protocol.Message(protocol.EVALUATE)) == 0


def test_message_rejects_unknown_task_and_non_scalar_config():
    with pytest.raises(ValueError, match="unknown task"):
        protocol.Message("train_everything")
    with pytest.raises(TypeError, match="scalar"):
        protocol.Message(protocol.TRAIN_LOCAL, {"epochs": [1, 2]})
