"""detect_anomaly: the first NaN/Inf in forward or backward, pointing at the user's line."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import rtxviz
from rtxviz import Tensor, Variable, nn
from rtxviz.debug import AnomalyError, detect_anomaly
from rtxviz.events import EventHook, validate_event

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _line_of(marker: str) -> int:
    lines, start = inspect.getsourcelines(inspect.getmodule(_line_of))
    return next(i for i, text in enumerate(lines, start or 1) if text.rstrip().endswith(marker))


def _leaf(values, name="x"):
    return Variable.from_tensor(Tensor.from_slice(values, [len(values)]), name=name)


def test_forward_log_zero_points_at_the_line():
    x = _leaf([0.0, 1.0])
    with pytest.raises(AnomalyError) as info:
        with detect_anomaly():
            a = x * 2.0
            a.log()  # <- LOG0
    e = info.value
    assert (e.op, e.phase, e.inf, e.nan) == ("log", "forward", 1, 0)
    assert e.site.filename == __file__ and e.site.lineno == _line_of("# <- LOG0")
    msg = str(e)
    assert f'line {_line_of("# <- LOG0")}' in msg and "a.log()" in msg
    assert "min 0, max 2, mean 1" in msg  # the input a = [0, 2]


def test_forward_zero_over_zero():
    x = _leaf([0.0, 3.0])
    with pytest.raises(AnomalyError) as info:
        with detect_anomaly():
            x / x  # <- DIV0
    assert info.value.op == "div" and info.value.nan == 1
    assert info.value.site.lineno == _line_of("# <- DIV0")


def test_backward_inf_blames_the_op_that_made_it():
    x = _leaf([0.0, 4.0])
    with detect_anomaly():
        y = x.sqrt()  # <- SQRT
        loss = y.sum()
        with pytest.raises(AnomalyError) as info:
            loss.backward()
    e = info.value
    assert (e.op, e.phase) == ("sqrt", "backward")
    assert e.site.lineno == _line_of("# <- SQRT")  # where sqrt was created, not where backward was called
    assert "input 0 (x)" in str(e)


def test_module_call_points_at_user_code_not_rtxviz():
    rtxviz.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 2))
    model[0].weight.data[...] = 1e38
    x = Tensor.from_slice([1e38, 1e38], [1, 2])
    with pytest.raises(AnomalyError) as info:
        with detect_anomaly():
            model(x)  # <- MODEL
    e = info.value
    assert e.phase == "forward" and e.inf == 2
    assert e.site.filename == __file__ and e.site.lineno == _line_of("# <- MODEL")
    assert "model.0.weight" in str(e)


def test_anomaly_reaches_the_event_stream():
    events = []
    hook = EventHook(events.append, check_anomalies=False)
    rtxviz.add_hook(hook)
    try:
        x = _leaf([0.0])
        with pytest.raises(AnomalyError), detect_anomaly():
            x.log()
    finally:
        rtxviz.remove_hook(hook)
    anomalies = [e for e in events if e["kind"] == "anomaly"]
    assert len(anomalies) == 1
    validate_event(anomalies[0])
    assert anomalies[0]["op"] == "log" and anomalies[0]["phase"] == "forward" and anomalies[0]["origin"]


def test_clean_run_is_silent_and_hook_detaches():
    x = _leaf([1.0, 2.0])
    with detect_anomaly() as hook:
        (x * x).sum().backward()
    assert hook not in rtxviz.engine.hooks.ACTIVE
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])


def test_nan_already_in_the_data_is_called_out():
    x = _leaf([float("nan"), 1.0])
    with pytest.raises(AnomalyError, match=r"input\(s\) \[0\] already held NaN"):
        with detect_anomaly():
            x * 2.0
