"""Tests for tfplace.measurement.send_delay."""

import pytest

import tfplace  # noqa: F401
from tfplace.errors import MeasureError
from tfplace.measurement import send_delay
from tfplace.measurement.config import MeasureConfig
from tfplace.measurement.local_cluster import LocalCluster, worker_device
from tfplace.measurement.timing import OpRecord

W0, W1 = worker_device(0), worker_device(1)


def test_delay_and_busy_time_by_hand():
  records = [OpRecord("seed", W0, 0.0, 2e-6),
             OpRecord("producer", W0, 4e-6, 6e-6),
             OpRecord("busy_0", W0, 11e-6, 9e-6),
             OpRecord("busy_1", W0, 20e-6, 20e-6),
             OpRecord("consumer", W1, 55e-6, 1e-6)]
  # The producer ends at 10 us, the consumer starts at 55 us, the chain
  # ends at 40 us: 30 us after the producer, 40 us after the step start.
  delay, busy = send_delay._delay_and_busy(records, "sender")
  assert delay == pytest.approx(45e-6) and busy == pytest.approx(30e-6)
  assert send_delay._delay_and_busy(records, "receiver")[1] == (
      pytest.approx(40e-6))
  idle = [r for r in records if not r.name.startswith("busy_")]
  assert send_delay._delay_and_busy(idle, "sender")[1] == 0.0
  with pytest.raises(MeasureError, match="producer or the consumer"):
    send_delay._delay_and_busy(records[:3], "sender")


def test_a_waiting_sender_first_waits_for_a_scalar_from_the_receiver():
  graph, fetches = send_delay._graph(W0, W1, "waiting_sender", "add", 3)
  ops = {op.name: op for op in graph.get_operations()}
  assert ops["go"].device == W1 and ops["producer"].device == W0
  assert ops["wait_0"].device == W1 and ops["busy_0"].device == W0
  # The producer reads go; the chain on the sender starts from the
  # producer.
  assert "go" in {t.op.name for t in ops["seed_and_go"].inputs}
  assert "producer" in {t.op.name for t in ops["busy_0"].inputs}
  assert len(fetches) == 2


@pytest.mark.parametrize("args", [dict(busy_side="both"),
                                  dict(kind="conv"), dict(busy_ops=-1)])
def test_bad_cases_are_refused(args):
  with pytest.raises(MeasureError, match="send delay"):
    send_delay.measure_send_delay(W0, W1, **args)


def test_measures_a_message_beside_a_busy_and_an_idle_sender():
  with LocalCluster(num_workers=2) as lc:
    config = MeasureConfig(target=lc.target, steps=3, warmup=1)
    idle = send_delay.measure_send_delay(W0, W1, "sender", "add", 0, config)
    busy = send_delay.measure_send_delay(W0, W1, "sender", "matmul", 20,
                                         config)
    receiver = send_delay.measure_send_delay(W0, W1, "receiver", "add", 50,
                                             config)
    waiting = send_delay.measure_send_delay(W0, W1, "waiting_sender", "add",
                                            50, config)
  for case in (idle, busy, receiver, waiting):
    assert case.steps == 3
    # The consumer starts after the producer ends, on another worker.
    assert 0.0 < case.delay_p10_s <= case.delay_s <= case.delay_p90_s
  assert idle.busy_s == 0.0 and idle.busy_ops == 0
  assert busy.busy_s > 0.0 and receiver.busy_s > 0.0 and waiting.busy_s > 0.0
