"""The scaling arithmetic of the cluster benchmark, against numbers worked out by hand from its stated model."""

import pytest

from slim_mp.measure.benchmark.cluster_scaling import (WireLoad, one_worker_step, parameter_servers_for,
                                                       workers_per_link)

MIB = 2 ** 20
# ResNet-50-like: 90 MiB each way per step, a 0.5 s step. The busier direction at 10 Gbit/s:
# 90 * 2**20 * 8 / 1e10 = 0.0754975 s, so 0.5 / 0.0754975 = 6.62 workers fit, and N workers need
# ceil(N * 0.0754975 / 0.5) servers: 8 -> ceil(1.208) = 2, 32 -> ceil(4.83) = 5, 128 -> ceil(19.33) = 20.
RESNET_LIKE = WireLoad(step_seconds=0.5, sent_bytes=90 * MIB, received_bytes=90 * MIB)


@pytest.mark.parametrize("gbits, workers", [(1, 0), (10, 6), (100, 66)])
def test_workers_one_link_carries(gbits, workers):
    assert workers_per_link(RESNET_LIKE, gbits) == workers


@pytest.mark.parametrize("workers, gbits, servers", [
    (8, 10, 2), (32, 10, 5), (128, 10, 20), (8, 100, 1), (128, 100, 2),
    (8, 1, None),  # one worker's own link needs 0.755 s per 0.5 s step: no number of servers helps
])
def test_parameter_servers_that_keep_the_workers_compute_bound(workers, gbits, servers):
    assert parameter_servers_for(workers, RESNET_LIKE, gbits) == servers


def test_the_busier_direction_bounds_a_full_duplex_link_not_the_sum():
    # 10 MB up, 30 MB down per 1 s step at 1 Gbit/s: 30e6 * 8 / 1e9 = 0.24 s per worker, 4 workers (0.96 s), not
    # the 40 MB sum's 3 (0.32 s each).
    load = WireLoad(step_seconds=1.0, sent_bytes=10_000_000, received_bytes=30_000_000)
    assert load.busier_direction_bytes == 30_000_000
    assert load.wire_seconds(1) == pytest.approx(0.24)
    assert workers_per_link(load, 1) == 4
    assert parameter_servers_for(5, load, 1) == 2  # 5 * 0.24 = 1.2 s > 1 s: two links


def test_exactly_the_step_time_on_the_wire_is_still_compute_bound():
    load = WireLoad(step_seconds=1.0, sent_bytes=125_000_000, received_bytes=0)  # 0.1 s at 10 Gbit/s
    assert workers_per_link(load, 10) == 10
    assert parameter_servers_for(10, load, 10) == 1 and parameter_servers_for(11, load, 10) == 2


def test_no_bytes_means_the_wire_never_sets_the_pace():
    assert workers_per_link(WireLoad(1.0, 0, 0), 1) is None
    assert parameter_servers_for(128, WireLoad(1.0, 0, 0), 1) == 1


def test_one_worker_on_a_link_takes_between_the_overlapped_and_the_serial_step():
    # 1 s step, 125 MB up and 250 MB down at 1 Gbit/s: 1 s and 2 s on the wire. Overlapped: max(1, 2) = 2 s;
    # serial: 1 + 1 + 2 = 4 s.
    assert one_worker_step(WireLoad(1.0, 125_000_000, 250_000_000), 1) == pytest.approx((2.0, 4.0))


@pytest.mark.parametrize("step, sent, received", [(0.0, 1, 1), (-1.0, 1, 1), (1.0, -1, 0)])
def test_a_wire_load_needs_a_positive_step_and_bytes(step, sent, received):
    with pytest.raises(ValueError, match="positive step time"):
        WireLoad(step, sent, received)
