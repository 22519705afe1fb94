"""Where a loader's batches are counted: by its feeder thread, or at the training thread's gets
(stallscope_job.sources.count_at_gets, QueueInfo.fed_by and uncount). No batch counted twice, none
missed, whatever the shape of the threads between the loader and the training loop."""

from __future__ import annotations

import queue
import unittest

from stallscope_job.sources import LoaderInfo, QueueInfo, count_at_gets


def loader(index: int) -> LoaderInfo:
    return LoaderInfo(None, index, [])


def data_queue(index: int, *loaders: LoaderInfo, gets: int = 3) -> QueueInfo:
    q = QueueInfo(queue.Queue(), index)
    q.data, q.gets = True, gets
    for lo in loaders:
        q.fed_by(lo)
    return q


class CountAtGets(unittest.TestCase):
    def test_one_feeder_one_queue_the_training_thread_takes_from(self):
        lo = loader(0)
        q = data_queue(0, lo)
        count_at_gets([q])
        self.assertIs(q.counts_for, lo)
        self.assertTrue(lo.counted_at_get)

    def test_a_queue_the_training_thread_never_took_from_leaves_it_to_the_feeder(self):
        lo = loader(0)
        first, second = data_queue(0, lo, gets=0), data_queue(1, lo)  # a chain: q0 -> thread -> q1
        count_at_gets([first, second])
        self.assertIsNone(first.counts_for)
        self.assertIsNone(second.counts_for)
        self.assertFalse(lo.counted_at_get)

    def test_two_loaders_into_one_queue_each_count_their_own(self):
        a, b = loader(0), loader(1)
        q = data_queue(0, a, b)
        count_at_gets([q])
        self.assertIsNone(q.counts_for)
        self.assertFalse(a.counted_at_get or b.counted_at_get)

    def test_a_second_loader_later_hands_the_count_back(self):
        a, b = loader(0), loader(1)
        q = data_queue(0, a)
        count_at_gets([q])
        q.fed_by(b)
        self.assertIsNone(q.counts_for)
        self.assertFalse(a.counted_at_get or b.counted_at_get)

    def test_a_new_queue_each_epoch_counts_as_the_first(self):
        lo = loader(0)
        first = data_queue(0, lo)
        count_at_gets([first])
        second = data_queue(1, lo, gets=0)  # MONAI's: made after counting started
        self.assertIs(second.counts_for, lo)
        self.assertTrue(lo.counted_at_get)

    def test_a_new_queue_shared_with_another_loader_hands_the_count_back(self):
        a, b = loader(0), loader(1)
        first = data_queue(0, a)
        count_at_gets([first])
        data_queue(1, b, a)
        self.assertFalse(a.counted_at_get)

    def test_another_thread_taking_from_it_hands_the_count_back(self):
        lo = loader(0)
        q = data_queue(0, lo)
        count_at_gets([q])
        q.uncount()  # what calls.Runtime.queue_get does for a get by a thread not training
        self.assertIsNone(q.counts_for)
        self.assertFalse(lo.counted_at_get)


if __name__ == "__main__":
    unittest.main()
