"""symscale.tasks: tasks in order here and on a Dask cluster, seeds split into independent
streams, a bad client refused by name."""

import numpy as np
import pytest

from symscale.tasks import (check_client, concatenate, iter_tasks, map_tasks, seed_batches)


def _draw(size, seed):
    return np.random.default_rng(seed).standard_normal(size)


def test_seed_batches_sizes_sum_and_one_task_keeps_the_seed():
    batches = seed_batches(2500, 1000, seed=7)
    assert [s for s, _ in batches] == [1000, 1000, 500]
    assert seed_batches(1000, 1000, seed=7) == [(1000, 7)]
    # one task draws what an unsplit run draws from the same seed
    one = concatenate([_draw(*b) for b in seed_batches(50, 100, seed=7)])
    np.testing.assert_array_equal(one, _draw(50, 7))


def test_seed_batches_give_independent_reproducible_streams():
    parts = [_draw(*b) for b in seed_batches(3000, 1000, seed=7)]
    again = [_draw(*b) for b in seed_batches(3000, 1000, seed=7)]
    for a, b in zip(parts, again):
        np.testing.assert_array_equal(a, b)
    # distinct streams: no two tasks repeat each other's draws, and the pooled draws are N(0,1)
    assert not np.array_equal(parts[0], parts[1])
    pooled = concatenate(parts)
    se = 1 / np.sqrt(pooled.size)
    assert abs(pooled.mean()) < 5 * se
    assert abs(np.corrcoef(parts[0], parts[1])[0, 1]) < 5 / np.sqrt(1000)
    # a Generator seed gives a stream drawn from it (reproducible from its state)
    g1 = [_draw(*b) for b in seed_batches(3000, 1000, seed=np.random.default_rng(1))]
    g2 = [_draw(*b) for b in seed_batches(3000, 1000, seed=np.random.default_rng(1))]
    np.testing.assert_array_equal(concatenate(g1), concatenate(g2))


@pytest.mark.parametrize("kwargs, exc, word", [
    (dict(n=0, per_task=1, seed=0), ValueError, "^n must"),
    (dict(n=5, per_task=0, seed=0), ValueError, "^per_task must"),
    (dict(n=5, per_task=2.5, seed=0), TypeError, "per_task"),
    (dict(n=5, per_task=2, seed=-1), ValueError, "^seed must"),
])
def test_seed_batches_bad_arguments_are_typed_errors(kwargs, exc, word):
    with pytest.raises(exc, match=word):
        seed_batches(**kwargs)


def test_bad_client_is_a_typed_error_naming_it():
    with pytest.raises(TypeError, match="client"):
        check_client("tcp://localhost:8786")
    with pytest.raises(TypeError, match="client"):
        map_tasks(_draw, [2], [0], client=object())


class _FakeFuture:
    def __init__(self, value, fail=False):
        self.value, self.fail = value, fail

    def result(self):
        if self.fail:
            raise RuntimeError("task failed")
        return self.value


class _FakeClient:
    """Records submissions and cancellations (what a Dask client is asked to do)."""

    def __init__(self, fail_at=None):
        self.fail_at, self.cancelled = fail_at, None

    def map(self, fn, *iterables, pure=True):
        assert pure is False  # random tasks must not be deduplicated by Dask
        return [_FakeFuture(fn(*a), i == self.fail_at) for i, a in enumerate(zip(*iterables))]

    def cancel(self, futures):
        self.cancelled = list(futures)


def test_tasks_come_back_in_order_and_a_failure_or_abandon_cancels_the_rest():
    client = _FakeClient()
    assert map_tasks(pow, [2, 3, 4], [2, 2, 2], client=client) == map_tasks(pow, [2, 3, 4],
                                                                            [2, 2, 2])
    assert client.cancelled is None
    client = _FakeClient(fail_at=1)
    with pytest.raises(RuntimeError, match="task failed"):
        map_tasks(pow, [2, 3, 4], [2, 2, 2], client=client)
    assert len(client.cancelled) == 3
    client = _FakeClient()
    it = iter_tasks(pow, [2, 3, 4], [2, 2, 2], client=client)
    assert next(it) == 4
    it.close()                      # abandoned after the first result
    assert len(client.cancelled) == 3
