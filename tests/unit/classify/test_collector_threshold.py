"""classify_stream raises the cyclic collector's first threshold while it reads (classifier.fewer_collections) and
sets it back; the findings are those of a classifier fed the same bytes directly."""

from __future__ import annotations

import gc
import io

import pytest

from legacy_gpu_patch.classify.classifier import YOUNG, Classifier, classify_stream, fewer_collections

LOG = b"".join(b"src/f%d.cpp:%d:1: error: 'sym%d' was not declared in this scope\n[%d/90] Building CXX object x.o\n"
               % (i % 7, i, i, i) for i in range(300))


@pytest.fixture()
def thresholds():
    before = gc.get_threshold()
    yield before
    gc.set_threshold(*before)


def test_raised_inside_and_set_back_after(thresholds) -> None:
    gc.set_threshold(700, 10, 10)
    with fewer_collections():
        assert gc.get_threshold() == (YOUNG, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


def test_set_back_when_the_block_raises(thresholds) -> None:
    gc.set_threshold(700, 10, 10)
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError("boom")
    assert gc.get_threshold() == (700, 10, 10)


def test_never_lowered_and_left_alone_where_collection_is_off(thresholds) -> None:
    gc.set_threshold(YOUNG * 2, 10, 10)
    with fewer_collections():
        assert gc.get_threshold() == (YOUNG * 2, 10, 10)
    gc.set_threshold(0, 10, 10)
    with fewer_collections():
        assert gc.get_threshold() == (0, 10, 10)
    gc.set_threshold(700, 10, 10)
    gc.disable()
    try:
        with fewer_collections():
            assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.enable()


def test_classify_stream_raises_it_while_reading_and_finds_the_same(thresholds) -> None:
    gc.set_threshold(700, 10, 10)
    seen = []

    class Probe(io.BytesIO):
        def read(self, size: int | None = -1) -> bytes:
            seen.append(gc.get_threshold()[0])
            return super().read(size)

    c = classify_stream(Probe(LOG), Classifier(), chunk=4096)
    assert seen and set(seen) == {YOUNG}
    assert gc.get_threshold() == (700, 10, 10)
    direct = Classifier()
    direct.feed(LOG)
    want = direct.close()
    got = c.findings()
    assert got and [f.to_dict() for f in got] == [f.to_dict() for f in want]
    assert (c.errors, c.warnings, c.dropped) == (direct.errors, direct.warnings, direct.dropped)
