"""The blob store: format, bounded blobs, chains, atomic links, corruption, dictionaries."""

from __future__ import annotations

import json
import os
import struct

import pytest

from sweepq.blobstore import BlobCorruptError, BlobStore, StoreError
from sweepq.blobstore import format as fmt
from sweepq.blobstore.store import CF_BLOBS, STORE_FORMAT


def recs(n, size=100, start=0):
    return [(b"%08d" % (start + i)) + b"x" * (size - 8) for i in range(n)]


def ids(n, start=0):
    return [(start + i).to_bytes(24, "big") for i in range(n)]


@pytest.fixture
def store(tmp_path):
    with BlobStore(tmp_path / "s", max_blob_records=50, max_blob_bytes=8 * 1024) as s:
        yield s


def test_round_trip_and_bounded_blobs(store):
    r = recs(500)
    infos = store.write_pending(b"Q/0", r, ids(500))
    assert sum(i.count for i in infos) == 500
    assert all(i.count <= 50 and i.raw_len <= 8 * 1024 + 4 for i in infos)
    out = [x for i in infos for x in store.read(i.blob_id)]
    assert out == r
    assert set(store.pending()) == {i.blob_id for i in infos}


def test_one_huge_record_still_gets_its_own_blob(store):
    big = [b"y" * 100_000]
    infos = store.write_pending(b"Q/0", big, ids(1))
    assert len(infos) == 1 and store.read(infos[0].blob_id) == big


def test_chains_link_at_head_and_tail_and_unlink(store):
    a = [i.blob_id for i in store.write_pending(b"Q/5", recs(60), ids(60))]
    b = [i.blob_id for i in store.write_pending(b"Q/5", recs(60, start=60), ids(60))]
    store.link(b"Q/5", b, at_head=False)
    store.link(b"Q/5", a, at_head=True)
    assert store.chain(b"Q/5") == a + b
    assert store.pending() == []
    store.unlink(b"Q/5", a[0])
    assert store.chain(b"Q/5") == a[1:] + b
    with pytest.raises(BlobCorruptError):
        store.read(a[0])  # gone with its unlink


def test_delete_pending(store):
    infos = store.write_pending(b"Q/1", recs(10), ids(10))
    store.delete_pending([i.blob_id for i in infos])
    assert store.pending() == []


def test_reopen_keeps_chains_and_blobs(tmp_path):
    p = tmp_path / "s"
    with BlobStore(p) as s:
        infos = s.write_pending(b"Q/2", recs(10), ids(10))
        s.link(b"Q/2", [i.blob_id for i in infos], at_head=False)
    with BlobStore(p) as s:
        assert s.chain(b"Q/2") == [i.blob_id for i in infos]
        assert s.read(infos[0].blob_id) == recs(10)
        more = s.write_pending(b"Q/2", recs(1), ids(1))
        assert more[0].blob_id > infos[-1].blob_id  # ids are never reused
    with BlobStore(p, clear=True) as s:
        assert s.chains() == {}


def test_flipped_bit_names_the_blob_its_owner_and_its_messages(store):
    infos = store.write_pending(b"ORDERS/4", recs(120), ids(120))
    victim = infos[1]
    key = struct.pack(">Q", victim.blob_id)
    value = bytearray(store._cf[CF_BLOBS][key])
    value[len(value) // 2] ^= 0x10
    store._cf[CF_BLOBS][key] = bytes(value)
    with pytest.raises(BlobCorruptError) as ei:
        store.read(victim.blob_id)
    e = ei.value
    assert e.blob_id == victim.blob_id and e.owner == b"ORDERS/4"
    assert e.ids == ids(120)[50:100]
    assert str(victim.blob_id) in str(e) and "ORDERS/4" in str(e) and ids(120)[50].hex() in str(e)
    assert store.read(infos[0].blob_id) == recs(120)[:50]  # every other blob stays readable
    assert store.read(infos[2].blob_id) == recs(120)[100:]


def test_not_a_store_and_newer_format(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(StoreError, match="not a sweepq store"):
        BlobStore(other)
    p = tmp_path / "s"
    with BlobStore(p) as s:
        s._cf["meta"][b"format"] = struct.pack("<I", STORE_FORMAT + 1)
    with pytest.raises(StoreError, match="newer"):
        BlobStore(p)


def test_blob_header_rejects_other_magic_and_newer_version():
    body = b"abc"
    good = fmt.pack(fmt.CODEC_NONE, 0, 1, 3, body)
    assert fmt.unpack(good)[0].count == 1
    with pytest.raises(fmt.FormatError, match="magic"):
        fmt.unpack(b"XXXX" + good[4:])
    newer = bytearray(good)
    newer[4] = fmt.FORMAT_VERSION + 1
    with pytest.raises(fmt.FormatError, match="newer"):
        fmt.unpack(bytes(newer))


def test_temporary_store_is_removed_at_close():
    s = BlobStore.temporary()
    path = s.path
    s.write_pending(b"Q/0", recs(3), ids(3))
    assert os.path.isdir(path)
    s.close()
    assert not os.path.exists(path)


def _json_messages(n, seed=0):
    import random

    rng = random.Random(seed)
    return [
        json.dumps(
            {
                "order": seed * 100000 + i,
                "customer": f"c{rng.randrange(1000)}",
                "sku": f"SKU-{rng.randrange(50)}",
                "qty": rng.randrange(1, 9),
                "status": rng.choice(["new", "paid", "shipped"]),
            }
        ).encode()
        for i in range(n)
    ]


def test_dictionary_trained_for_small_records_and_kept_while_referenced(tmp_path):
    with BlobStore(tmp_path / "d", max_blob_records=64) as s:
        first = _json_messages(6000)
        infos = s.write_pending(b"Q/0", first, ids(6000), scope=b"Q")
        assert s.stats.dictionaries_trained == 1
        dict_id = s.stats.dict_ids[b"Q"]
        assert infos[-1].dict_id == dict_id
        assert s.read(infos[-1].blob_id) == first[-len(s.read(infos[-1].blob_id)) :]
        s.link(b"Q/0", [i.blob_id for i in infos], at_head=False)
    # A reopened store can still read the blobs written with the dictionary.
    with BlobStore(tmp_path / "d") as s:
        assert s.read(infos[-1].blob_id)[-1] == first[-1]


def test_dictionary_improves_small_blob_ratio(tmp_path):
    msgs = _json_messages(8000)
    sizes = {}
    for use in (False, True):
        with BlobStore(tmp_path / f"r{use}", max_blob_records=16, dictionaries=use) as s:
            s.write_pending(b"Q/0", msgs[:4000], ids(4000), scope=b"Q")  # training material
            infos = s.write_pending(b"Q/0", msgs[4000:], ids(4000), scope=b"Q")
            sizes[use] = sum(i.comp_len for i in infos)
    assert sizes[True] < sizes[False]


def test_unclosed_temporary_store_is_removed_when_dropped():
    import gc

    s = BlobStore.temporary()
    path = s.path
    s.write_pending(b"Q/0", recs(2), ids(2))
    s._db.close()  # as the interpreter would at exit; the object is simply dropped
    s._cf.clear()
    s._h.clear()
    del s
    gc.collect()
    assert not os.path.exists(path)
