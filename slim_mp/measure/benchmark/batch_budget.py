"""The largest batch whose train step fits a memory budget, found by measuring peaks in subprocesses.

What users pick mixed precision for is often a larger batch: ``largest_batch_within`` answers how
much larger. The memory of one batch size is its peak above baseline (``peak_memory``: each batch in
a fresh subprocess). The search doubles the batch from 1 until a batch does not fit, then bisects
between the last batch that fit and the first that did not, so it ends with two adjacent batches
measured: the answer fits, the answer plus one does not (the contract the tests check). A search
reaching ``max_batch`` stops there, the answer then being a lower bound.
"""

from typing import Callable, Dict

from slim_mp.measure.benchmark.suite_results import BatchFit, check_memory_budget

MIB = 2 ** 20
DEFAULT_MAX_BATCH = 1024


def largest_batch_within(model: str, label: str, budget_mb: float, bytes_above_baseline: Callable[[int], int],
                         max_batch: int = DEFAULT_MAX_BATCH) -> BatchFit:
    """Search the largest batch size whose peak above baseline is at most ``budget_mb`` MiB.

    Args:
      model: the network's name, for the record.
      label: the variant's label (``float32``, ``slim_mp_bf16``), for the record.
      budget_mb: the budget in MiB (checked by ``check_memory_budget``).
      bytes_above_baseline: measures one batch size: its peak bytes above the baseline.
      max_batch: the search stops there.

    Returns:
      A ``BatchFit`` with every batch measured; ``largest_batch`` None when even batch 1 does not fit.
    """
    budget_bytes = int(check_memory_budget(budget_mb) * MIB)
    peaks: Dict[int, int] = {}

    def fits(batch: int) -> bool:
        if batch not in peaks:
            peaks[batch] = bytes_above_baseline(batch)
        return peaks[batch] <= budget_bytes

    largest = None
    batch = 1
    while fits(batch):
        largest = batch
        if batch >= max_batch:
            break
        batch = min(2 * batch, max_batch)
    if largest is not None and largest < max_batch:
        over = batch
        while over - largest > 1:
            middle = (largest + over) // 2
            if fits(middle):
                largest = middle
            else:
                over = middle
    return BatchFit(model, label, budget_bytes, largest, tuple(sorted(peaks.items())), max_batch)
