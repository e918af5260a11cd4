"""The eager engine's ready queue: libstdc++'s std::priority_queue, tie-breaking included.

Consumes (key, item) pairs; pops the largest key first.  Ties are broken exactly as
libstdc++'s push_heap/pop_heap break them (neither FIFO nor LIFO), so that our engine runs
nodes in the same order as torch/csrc/autograd/engine.cpp (ENGINE.md 1.5).
"""


class StdHeap:
    __slots__ = ("items", "keys")

    def __init__(self) -> None:
        self.keys: list = []
        self.items: list = []

    def __len__(self) -> int:
        return len(self.keys)

    def _sift_up(self, hole: int, key, item) -> None:
        keys, items = self.keys, self.items
        parent = (hole - 1) // 2
        while hole > 0 and keys[parent] < key:
            keys[hole], items[hole] = keys[parent], items[parent]
            hole = parent
            parent = (hole - 1) // 2
        keys[hole], items[hole] = key, item

    def push(self, key, item) -> None:
        self.keys.append(key)
        self.items.append(item)
        self._sift_up(len(self.keys) - 1, key, item)

    def pop(self):
        keys, items = self.keys, self.items
        if len(keys) > 1:
            last = len(keys) - 1
            vk, vi = keys[last], items[last]
            keys[last], items[last] = keys[0], items[0]
            hole = child = 0
            while child < (last - 1) // 2:
                child = 2 * child + 2
                if keys[child] < keys[child - 1]:
                    child -= 1
                keys[hole], items[hole] = keys[child], items[child]
                hole = child
            if last % 2 == 0 and child == (last - 2) // 2:
                child = 2 * child + 2
                keys[hole], items[hole] = keys[child - 1], items[child - 1]
                hole = child - 1
            self._sift_up(hole, vk, vi)
        keys.pop()
        return items.pop()
