"""The blob store contract, run over every store (nats-server's store_test.go is the model),
then what only the RocksDB store has: files, reopening, formats, dictionaries on disk."""

from __future__ import annotations

import contextlib
import json
import os
import struct
import time

import pytest

from sweepq.blobstore import (
    MEMORY_HELD,
    BlobCorruptError,
    BlobInfo,
    BlobStore,
    Capability,
    Checkpointing,
    DamageLog,
    FaultyStore,
    Frame,
    MemoryStore,
    Salvage,
    Salvaging,
    Store,
    StoreError,
)
from sweepq.blobstore import format as fmt
from sweepq.blobstore.kv import CF_META, MemoryKV
from sweepq.blobstore.rocks import RocksKV
from sweepq.blobstore.store import STORE_FORMAT
from sweepq.sweeper.runs import record_ends


def recs(n, size=100, start=0):
    return [(b"%08d" % (start + i)) + b"x" * (size - 8) for i in range(n)]


def ids(n, start=0):
    return [(start + i).to_bytes(24, "big") for i in range(n)]


def write(store: Store, owner: bytes, records, record_ids, scope=None):
    """Write records as pending blobs cut the way the sweeper cuts them."""
    ends = record_ends(records, store.max_blob_bytes, store.max_blob_records)
    return store.write_pending(owner, records, record_ids, ends, scope)


BOUNDS = {"max_blob_records": 50, "max_blob_bytes": 8 * 1024}


@pytest.fixture(params=["rocksdb", "memory", "faulty"])
def store(request, tmp_path):
    """Every implementation of the Store protocol (the faulty one with no fault armed)."""
    if request.param == "rocksdb":
        s = BlobStore(tmp_path / "s", **BOUNDS)
    elif request.param == "memory":
        s = MemoryStore(**BOUNDS)
    else:
        s = FaultyStore(MemoryStore(**BOUNDS))
    yield s
    s.close()


def real(store):
    return store.inner if isinstance(store, FaultyStore) else store


def test_round_trip_and_bounded_blobs(store):
    r = recs(500)
    infos = write(store, b"Q/0", r, ids(500))
    assert sum(i.count for i in infos) == 500
    assert all(i.count <= 50 and i.raw_len <= 8 * 1024 + 4 for i in infos)
    out = [x for i in infos for x in store.read(i.blob_id)]
    assert out == r
    assert set(store.pending()) == {i.blob_id for i in infos}


def test_one_huge_record_still_gets_its_own_blob(store):
    big = [b"y" * 100_000]
    infos = write(store, b"Q/0", big, ids(1))
    assert len(infos) == 1 and store.read(infos[0].blob_id) == big


def test_chains_link_at_head_and_tail_and_unlink(store):
    a = [i.blob_id for i in write(store, b"Q/5", recs(60), ids(60))]
    b = [i.blob_id for i in write(store, b"Q/5", recs(60, start=60), ids(60))]
    store.link(b"Q/5", b, at_head=False)
    store.link(b"Q/5", a, at_head=True)
    assert store.chain(b"Q/5") == a + b
    assert store.pending() == []
    store.unlink(b"Q/5", a[0])
    assert store.chain(b"Q/5") == a[1:] + b
    with pytest.raises(BlobCorruptError):
        store.read(a[0])  # gone with its unlink


def test_reopen_keeps_chains_and_blobs(tmp_path):
    p = tmp_path / "s"
    with BlobStore(p) as s:
        infos = write(s, b"Q/2", recs(10), ids(10))
        s.link(b"Q/2", [i.blob_id for i in infos], at_head=False)
    with BlobStore(p) as s:
        assert s.chain(b"Q/2") == [i.blob_id for i in infos]
        assert s.read(infos[0].blob_id) == recs(10)
        more = write(s, b"Q/2", recs(1), ids(1))
        assert more[0].blob_id > infos[-1].blob_id  # ids are never reused
    with BlobStore(p, clear=True) as s:
        assert s.chains() == {}


def test_flipped_bit_names_the_blob_its_owner_and_its_messages(store):
    infos = write(store, b"ORDERS/4", recs(120), ids(120))
    victim = infos[1]
    value = bytearray(real(store).raw_blob(victim.blob_id))
    value[len(value) // 2] ^= 0x10
    real(store).replace_raw_blob(victim.blob_id, bytes(value))
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
    BlobStore(p).close()
    kv = RocksKV(str(p))
    kv.write([(CF_META, b"format", struct.pack("<I", STORE_FORMAT + 1))])
    kv.close()
    with pytest.raises(StoreError, match="newer"):
        BlobStore(p)


def test_blob_header_rejects_other_magic_and_newer_version():
    body = b"abc"
    good = fmt.pack(fmt.CODEC_NONE, 1, b"Q/0", 0, 0, 1, 3, body)
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
    write(s, b"Q/0", recs(3), ids(3))
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
        infos = write(s, b"Q/0", first, ids(6000), scope=b"Q")
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
            write(s, b"Q/0", msgs[:4000], ids(4000), scope=b"Q")  # training material
            infos = write(s, b"Q/0", msgs[4000:], ids(4000), scope=b"Q")
            sizes[use] = sum(i.comp_len for i in infos)
    assert sizes[True] < sizes[False]


def test_unclosed_temporary_store_is_removed_when_dropped():
    import gc

    s = BlobStore.temporary()
    path = s.path
    write(s, b"Q/0", recs(2), ids(2))
    del s
    gc.collect()
    assert not os.path.exists(path)


# -- the contract, continued: what the issue of store faults asked for ------------------------


def test_a_valid_blob_under_another_key_or_owner_is_refused(store):
    a = write(store, b"Q/0", recs(50), ids(50))[0]
    b = write(store, b"Q/0", recs(50, start=50), ids(50, start=50))[0]
    real(store).replace_raw_blob(b.blob_id, real(store).raw_blob(a.blob_id))  # a's bytes under b's key
    with pytest.raises(BlobCorruptError, match="written as blob"):
        store.read(b.blob_id)
    assert store.read(a.blob_id, b"Q/0", a.check) == recs(50)
    with pytest.raises(BlobCorruptError, match="does not belong"):
        store.read(a.blob_id, b"Q/1", a.check)
    with pytest.raises(BlobCorruptError, match="other records"):
        store.read(a.blob_id, b"Q/0", b.check)


def test_a_failed_write_changes_nothing(store):
    faulty = store if isinstance(store, FaultyStore) else FaultyStore(store)
    infos = write(faulty, b"Q/3", recs(60), ids(60))
    for method, call in [
        ("link", lambda: faulty.link(b"Q/3", [infos[0].blob_id], at_head=False)),
        ("delete_pending", lambda: faulty.delete_pending([infos[1].blob_id])),
    ]:
        faulty.fail(method)
        with pytest.raises(StoreError, match="injected"):
            call()
        assert faulty.chain(b"Q/3") == [] and set(faulty.pending()) == {i.blob_id for i in infos}
    faulty.link(b"Q/3", [i.blob_id for i in infos], at_head=False)
    faulty.fail("unlink")
    with pytest.raises(StoreError):
        faulty.unlink(b"Q/3", infos[0].blob_id)
    assert faulty.chain(b"Q/3") == [i.blob_id for i in infos]
    assert faulty.read(infos[0].blob_id) == recs(60)[:50]


def test_memory_is_reported(store):
    write(store, b"Q/0", recs(100), ids(100))
    mem = store.memory()
    assert isinstance(mem, dict) and mem and all(isinstance(v, int) for v in mem.values())


def test_rocksdb_memory_is_bounded_and_reported(tmp_path):
    with BlobStore(tmp_path / "m", write_buffer_bytes=4 << 20, block_cache_bytes=1 << 20) as s:
        for k in range(40):  # 40 x 256 KiB of incompressible blobs: ten times the memtable cap
            payload = [os.urandom(1000) for _ in range(250)]
            s.link(b"Q/0", [i.blob_id for i in write(s, b"Q/0", payload, ids(250, k * 250))], at_head=False)
        mem = s.memory()
    assert mem["write_buffer_limit"] == 4 << 20 and mem["block_cache_limit"] == 1 << 20
    assert 0 < mem["memtable_bytes"] <= 2 * (4 << 20)


def _table_bytes(path) -> int:
    """The bytes of the table files in ``path`` now. RocksDB's own compaction may delete one
    between the listing and its stat (the test below waits on exactly that): it counts 0."""
    total = 0
    for f in path.iterdir():
        if f.suffix == ".sst":
            with contextlib.suppress(FileNotFoundError):
                total += f.stat().st_size
    return total


def test_a_table_file_of_deleted_records_is_compacted_away(tmp_path):
    """A sweep deletes thousands of records at once; their tombstones must not stay in level
    0 above the dead records, where every scan (a reopen's first of all) steps over both:
    RocksDB compacts such a file by itself (rocks.py, DELETES_TO_COMPACT), with no
    compaction asked for. Without it, two level-0 files stay, under RocksDB's trigger of 4."""
    keys = [b"Q\0\0" + i.to_bytes(8, "big") for i in range(20_000)]
    with BlobStore(tmp_path / "c") as s:
        s.write_messages(puts=[(k, b"r" * 100) for k in keys])
        s.flush()
        written = _table_bytes(tmp_path / "c")
        assert written > 20_000 * 100
        s.write_messages(deletes=keys)
        s.flush()
        deadline = time.monotonic() + 60  # a bound, not a wait: the loop ends on the state
        while _table_bytes(tmp_path / "c") >= written and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _table_bytes(tmp_path / "c") < written / 10
        assert s.messages(b"Q") == []


def test_store_options_are_checked():
    for bad in ({"max_blob_bytes": 0}, {"max_blob_records": "many"}, {"level": 99}, {"write_buffer_bytes": 10}):
        with pytest.raises(StoreError, match=next(iter(bad))):
            MemoryStore(**bad)


def test_a_damaged_table_file_reads_as_a_corrupt_blob(tmp_path):
    """Bits flipped in a RocksDB table file: RocksDB's own checksum fails, and the store says
    which blob and which records, as for a blob whose own checksum fails."""
    p = tmp_path / "sst"
    with BlobStore(p, max_blob_records=50, block_cache_bytes=0) as s:
        payload = [os.urandom(2000) for _ in range(100)]
        infos = write(s, b"Q/0", payload, ids(100))
        s.link(b"Q/0", [i.blob_id for i in infos], at_head=False)
        s.flush()
        tables = [f for f in os.listdir(p) if f.endswith(".sst")]
        assert tables
        for name in tables:
            path = p / name
            data = bytearray(path.read_bytes())
            if len(data) > 100_000:  # the blobs' table: damage the middle of it
                for k in range(len(data) // 4, len(data) // 2, 4096):
                    data[k] ^= 0xFF
                path.write_bytes(bytes(data))
        errors = []
        for info in infos:
            try:
                s.read(info.blob_id)
            except BlobCorruptError as e:
                errors.append(e)
        assert errors, "the damage was not detected"
        assert all(e.owner == b"Q/0" and e.ids for e in errors)


# -- the contract, method by method: each test body runs over every store -------------------------
#
# One test per member of the protocols (Store and the optional ones a store declares in its
# capabilities), named test_<member>; test_every_member_of_the_protocols_has_a_test checks
# that none is left out.


def test_capabilities(store):
    assert isinstance(store.capabilities, Capability)
    assert isinstance(store, Store)
    for flag, proto in PROTOCOLS.items():
        if flag in store.capabilities:
            assert all(callable(getattr(store, m, None)) for m in members(proto)), flag


def test_write_pending(store):
    infos = write(store, b"Q/0", recs(120), ids(120), scope=b"Q")
    assert [i.count for i in infos] == [50, 50, 20]
    assert all(
        isinstance(i, BlobInfo) and i.check == fmt.ids_check(ids(120)[k * 50 : k * 50 + i.count])
        for k, i in enumerate(infos)
    )
    assert len({i.blob_id for i in infos}) == 3 and set(store.pending()) == {i.blob_id for i in infos}
    with pytest.raises(ValueError):
        store.write_pending(b"Q/0", recs(2), ids(1), [2])


def test_delete_pending(store):
    infos = write(store, b"Q/0", recs(60), ids(60))
    store.delete_pending([infos[0].blob_id])
    assert store.pending() == [infos[1].blob_id]
    store.delete_pending([])  # nothing to do
    with pytest.raises(BlobCorruptError, match="missing"):
        store.read(infos[0].blob_id)


def test_link(store):
    a = write(store, b"Q/0", recs(50), ids(50))[0].blob_id
    b = write(store, b"Q/0", recs(50, start=50), ids(50, 50))[0].blob_id
    store.write_messages(puts=[(b"k1", b"v1"), (b"k2", b"v2")])
    store.link(b"Q/0", [b], at_head=False, moved=[b"k1"])
    store.link(b"Q/0", [a], at_head=True)
    assert store.chain(b"Q/0") == [a, b] and store.pending() == []
    assert store.messages() == [(b"k2", b"v2")]  # the moved record left its own key


def test_unlink(store):
    a, b = (i.blob_id for i in write(store, b"Q/0", recs(100), ids(100)))
    store.link(b"Q/0", [a, b], at_head=False)
    store.write_messages(marks=[(a, 3, b"R")])
    store.unlink(b"Q/0", a, restore=[(b"back", b"rec")])
    assert store.chain(b"Q/0") == [b] and store.marks(a) == {}
    assert store.messages() == [(b"back", b"rec")]
    with pytest.raises(BlobCorruptError):
        store.read(a)


def test_detach(store):
    a, b = (i.blob_id for i in write(store, b"Q/0", recs(100), ids(100)))
    store.link(b"Q/0", [a, b], at_head=False)
    store.detach(b"Q/0", a)
    assert store.chain(b"Q/0") == [b]
    assert store.read(a) == recs(100)[:50]  # kept, for inspection


def test_drop_chain(store):
    infos = write(store, b"Q/0", recs(100), ids(100))
    store.link(b"Q/0", [i.blob_id for i in infos], at_head=False)
    store.drop_chain(b"Q/0")
    assert store.chain(b"Q/0") == [] and store.chains() == {} and store.pending() == []
    with pytest.raises(BlobCorruptError):
        store.read(infos[0].blob_id)


def test_write_messages(store):
    b = write(store, b"Q/0", recs(10), ids(10))[0].blob_id
    store.write_messages(puts=[(b"a", b"1"), (b"b", b"2")], marks=[(b, 1, b"R"), (b, 2, b"B\x01\x00")])
    store.write_messages(deletes=[b"a"], marks=[(b, 1, None)])
    assert store.messages() == [(b"b", b"2")] and store.marks(b) == {2: b"B\x01\x00"}
    store.write_messages()  # nothing: no write


def test_write_message(store):
    store.write_message(b"a", b"1")  # the one-record write of a lone durable put and get
    store.write_message(b"b", b"2")
    store.write_message(b"a", None)
    store.write_message(b"b", b"3")
    assert store.messages() == [(b"b", b"3")]


def test_message_writer(store):
    """The callable the journal keeps does write_message's writes and deletes, on the store
    it was taken from, and fails as closed once the store is closed."""
    write = store.message_writer()
    write(b"a", b"1")
    write(b"b", b"2")
    write(b"a", None)
    assert store.messages() == [(b"b", b"2")]
    store.close()
    with pytest.raises(StoreError, match="closed"):
        write(b"c", b"3")


def test_messages(store):
    store.write_messages(puts=[(b"Q\x00\x01", b"x"), (b"Q\x00\x00", b"y"), (b"R\x00\x00", b"z")])
    assert store.messages(b"Q\x00") == [(b"Q\x00\x00", b"y"), (b"Q\x00\x01", b"x")]
    assert [k for k, _ in store.messages()] == [b"Q\x00\x00", b"Q\x00\x01", b"R\x00\x00"]


def test_message_chunks(store):
    keys = [b"Q\x00\x00" + bytes([i]) for i in range(5)]
    store.write_messages(puts=[(k, b"v%d" % i) for i, k in enumerate(keys)] + [(b"R\x00\x00", b"z")])
    chunks = list(store.message_chunks(b"Q\x00", 2))
    assert [len(c) for c in chunks] == [2, 2, 1]  # in key order, at most two pairs each
    assert [p for c in chunks for p in c] == store.messages(b"Q\x00") == [(k, b"v%d" % i) for i, k in enumerate(keys)]
    assert list(store.message_chunks(b"S\x00", 2)) == []
    faulty = store if isinstance(store, FaultyStore) else FaultyStore(store)
    faulty.fail("messages")  # the same reads as messages(): the same faults
    with pytest.raises(StoreError, match="injected"):
        next(faulty.message_chunks(b"Q\x00", 2))


def test_read_frame(store):
    records = recs(7)
    info = write(store, b"Q/0", records, ids(7))[0]
    frame = store.read_frame(info.blob_id, b"Q/0", info.check)
    assert isinstance(frame, Frame) and frame.count == 7 and frame.check == info.check
    lengths = struct.unpack_from("<7I", frame.data)
    assert list(lengths) == [len(r) for r in records] and frame.data[28:] == b"".join(records)
    with pytest.raises(BlobCorruptError):  # verified as read() is
        store.read_frame(info.blob_id, b"Q/1")
    for cut in (frame.data[:-1], frame.data + b"x", frame.data[:20]):  # a table that does not add up
        with pytest.raises(fmt.FormatError):
            fmt.check_frame(cut, 7)


def test_marks(store):
    b = write(store, b"Q/0", recs(10), ids(10))[0].blob_id
    assert store.marks(b) == {}
    store.write_messages(marks=[(b, 7, b"R"), (b, 0, b"R")])
    assert store.marks(b) == {0: b"R", 7: b"R"}


def test_objects(store):
    assert store.objects() == {}
    store.put_object(b"Q", b"{}")
    assert store.objects() == {b"Q": b"{}"}


def test_put_object(store):
    infos = write(store, b"Q/0", recs(60), ids(60))
    store.link(b"Q/0", [i.blob_id for i in infos], at_head=False)
    store.write_messages(puts=[(b"Q\x00a", b"1"), (b"R\x00a", b"2")])
    store.put_object(b"Q", b"def")
    store.put_object(b"Q", None, drop_messages=b"Q\x00", drop_chains=[b"Q/0"])
    assert store.objects() == {} and store.messages() == [(b"R\x00a", b"2")] and store.chains() == {}


def test_sync(store):
    store.write_messages(puts=[(b"a", b"1")])
    store.sync()


def test_read(store):
    info = write(store, b"Q/0", recs(30), ids(30))[0]
    assert store.read(info.blob_id) == recs(30)
    assert store.read(info.blob_id, b"Q/0", info.check) == recs(30)
    with pytest.raises(BlobCorruptError, match="missing"):
        store.read(999_999)


def test_manifest(store):
    info = write(store, b"ORDERS/2", recs(30), ids(30))[0]
    assert store.manifest(info.blob_id) == (b"ORDERS/2", ids(30))
    assert store.manifest(999_999) == (b"?", [])


def test_chain(store):
    assert store.chain(b"nothing") == []
    info = write(store, b"Q/0", recs(10), ids(10))[0]
    store.link(b"Q/0", [info.blob_id], at_head=False)
    c = store.chain(b"Q/0")
    c.append(123)  # a copy: the store's own is untouched
    assert store.chain(b"Q/0") == [info.blob_id]


def test_chains(store):
    for name in (b"A/0", b"B/3"):
        store.link(name, [write(store, name, recs(5), ids(5))[0].blob_id], at_head=False)
    assert set(store.chains()) == {b"A/0", b"B/3"}


def test_pending(store):
    assert store.pending() == []
    info = write(store, b"Q/0", recs(5), ids(5))[0]
    assert store.pending() == [info.blob_id]
    store.link(b"Q/0", [info.blob_id], at_head=False)
    assert store.pending() == []


def test_memory(store):
    mem = store.memory()
    assert isinstance(mem, dict) and isinstance(mem[MEMORY_HELD], int) and mem[MEMORY_HELD] >= 0


def test_close(store):
    store.write_messages(puts=[(b"a", b"1")])
    store.close()
    store.close()  # twice is harmless
    with pytest.raises(StoreError, match="closed"):
        store.messages()


def test_salvage_messages(store):
    store.write_messages(puts=[(b"Q\x00a", b"1"), (b"R\x00a", b"2")])
    s = store.salvage_messages(b"Q\x00")  # nothing damaged: everything proven
    assert isinstance(s, Salvage) and s.pairs == [(b"Q\x00a", b"1")] and s.damaged == [] and s.gaps == []


def test_quarantine_messages(store):
    store.write_messages(puts=[(b"Q\x00a", b"1"), (b"Q\x00b", b"2")])
    store.quarantine_messages([b"Q\x00a", b"Q\x00absent"])
    assert store.messages() == [(b"Q\x00b", b"2")]


def test_damage_log(store):
    assert store.damage_log() == []


def test_on_damage(store):
    heard = []
    store.on_damage(heard.append)  # accepted; called only after a rebuild (tests/test_damage.py)
    assert heard == []


@pytest.mark.parametrize("kind", ["rocksdb", "memory"])
def test_detached(kind, tmp_path):
    """A blob detached as damaged is no pending blob of an interrupted sweep: the next open,
    after a close or a kill, keeps it and gives it (detached) until delete_pending deletes it;
    a pending blob is deleted by the open as before."""
    kv = MemoryKV()

    def reopen(old=None):
        if kind == "memory":
            return MemoryStore(kv=kv, **BOUNDS)  # the dicts as a killed process left them
        if old is not None:
            old.close()
        return BlobStore(tmp_path / "s", **BOUNDS)

    s = reopen()
    a, b = (i.blob_id for i in write(s, b"Q/0", recs(100), ids(100)))
    s.link(b"Q/0", [a, b], at_head=False)
    s.write_messages(marks=[(a, 3, b"R")])
    pending = write(s, b"Q/0", recs(5), ids(5))[0].blob_id
    s.detach(b"Q/0", a)
    assert s.detached() == []  # what an earlier run detached, not this one
    s = reopen(s)
    assert s.detached() == [a] and s.pending() == [a]  # the pending blob went, the detached one stays
    assert s.manifest(a) == (b"Q/0", ids(50)) and s.marks(a) == {3: b"R"}
    s = reopen(s)
    assert s.detached() == [a]  # until it is deleted
    s.delete_pending([a])
    assert s.detached() == [] and s.pending() == []
    s = reopen(s)
    assert s.detached() == [] and s.pending() == [] and pending not in s.chains().get(b"Q/0", [])
    if kind == "rocksdb":
        s.close()


@pytest.mark.parametrize("how", ["drop_chain", "put_object"])
@pytest.mark.parametrize("kind", ["rocksdb", "memory"])
def test_a_dropped_chain_takes_its_detached_blobs(kind, how, tmp_path):
    """A queue deleted with purge drops its chains with their blobs: the blobs a get detached
    from them as damaged go too, with their marks, so that the next open names nothing of a
    queue that was deleted (it would report their messages lost); another chain's stay."""
    kv = MemoryKV()

    def reopen(old=None):
        if kind == "memory":
            return MemoryStore(kv=kv, **BOUNDS)
        if old is not None:
            old.close()
        return BlobStore(tmp_path / "s", **BOUNDS)

    s = reopen()
    a, b = (i.blob_id for i in write(s, b"Q/0", recs(100), ids(100)))
    c = write(s, b"R/0", recs(50), ids(50))[0].blob_id
    s.link(b"Q/0", [a, b], at_head=False)
    s.link(b"R/0", [c], at_head=False)
    s.detach(b"Q/0", a)
    s.detach(b"R/0", c)
    if how == "drop_chain":
        s.drop_chain(b"Q/0")
    else:
        s.put_object(b"Q", None, drop_messages=b"Q\0", drop_chains=[b"Q/0"])
    with pytest.raises(BlobCorruptError):
        s.read(a)  # gone now, not at the next open
    s = reopen(s)
    assert s.detached() == [c] and s.chains().get(b"Q/0", []) == []
    with pytest.raises(BlobCorruptError):
        s.read(a)
    if kind == "rocksdb":
        s.close()


def test_checkpoint(store):
    assert store.checkpoint() is None


def test_write_checkpoint(store):
    store.write_checkpoint(b"first")
    store.write_checkpoint(b"second")
    assert store.checkpoint() == b"second"


@pytest.mark.parametrize("kind", ["rocksdb", "memory"])
def test_since_checkpoint(kind, tmp_path):
    """What changed in the message records since the last checkpoint, as the store reopened
    (after a close, or on what a killed process left) has it: the last write of each key with
    the first bytes of its record, the keys removed for good, the marks; a checkpoint starts
    the record again."""
    kv = MemoryKV()

    def reopen(old=None):
        if kind == "memory":
            return MemoryStore(kv=kv)  # the dicts as a killed process left them
        if old is not None:
            old.close()
        return BlobStore(tmp_path / "s")

    s = reopen()
    assert s.since_checkpoint().written == {} and not s.since_checkpoint().removed
    s.write_checkpoint(b"c")
    s.write_messages(puts=[(b"Q\0a", b"v" * 100), (b"Q\0b", b"w")], marks=[(7, 1, b"R")])
    s.write_messages(deletes=[b"Q\0b"])
    s = reopen(s)
    since = s.since_checkpoint()
    assert since.written == {b"Q\0a": b"v" * 64} and since.removed == {b"Q\0b"}
    assert since.marks == {(7, 1): b"R"} and since.complete and not since.lost_writes
    s.write_checkpoint(b"d")
    s = reopen(s)
    assert s.since_checkpoint().written == {} and not s.since_checkpoint().removed
    if kind == "rocksdb":
        s.close()


def test_blob_horizon(store):
    before = store.blob_horizon()
    infos = write(store, b"Q/0", recs(60), ids(60))
    assert all(before <= i.blob_id < store.blob_horizon() for i in infos)
    store.delete_pending([i.blob_id for i in infos])
    assert store.blob_horizon() > max(i.blob_id for i in infos)  # ids are never reused


PROTOCOLS = {Capability.SALVAGE: Salvaging, Capability.DAMAGE_LOG: DamageLog, Capability.CHECKPOINT: Checkpointing}


def members(proto) -> set[str]:
    return {m for m in vars(proto) if not m.startswith("_")} | set(getattr(proto, "__annotations__", {}))


def test_every_member_of_the_protocols_has_a_test():
    tested = {name[5:] for name in globals() if name.startswith("test_")}
    wanted = (members(Store) - {"max_blob_bytes", "max_blob_records"}) | set().union(*map(members, PROTOCOLS.values()))
    assert wanted <= tested, sorted(wanted - tested)
    assert len(wanted) >= 28  # 20 of Store, 8 of the optional protocols


# -- the side log: written in place over zeros (issue 31) ----------------------------------------


def _side_log(tmp_path, first=b"start", in_place=True):
    from sweepq.blobstore.sidelog import SideLog

    log = SideLog(str(tmp_path), "t", in_place)
    log.start(first)
    return log


def test_a_side_log_starts_zero_filled_to_a_chunk_and_grows_by_chunks(tmp_path):
    from sweepq.blobstore.sidelog import CHUNK

    log = _side_log(tmp_path)
    path = tmp_path / "sweepq-t"
    assert path.stat().st_size == CHUNK
    record = os.urandom(CHUNK // 8)
    for _ in range(8):
        log.append(record)
        log.sync()
    assert log.failed is None
    assert path.stat().st_size == 2 * CHUNK  # one chunk more, not one size change per record
    data = path.read_bytes()
    used = 4 + 9 * 8 + len(b"start") + 8 * len(record)
    assert not any(data[used:])  # zeros after the last record
    assert log.read() == ([b"start", *[record] * 8], None)


def test_side_log_appends_from_threads_land_whole(tmp_path):
    import threading

    log = _side_log(tmp_path)
    records = {t: [b"%d-%d-" % (t, i) + bytes([t]) * (i * 37 % 3000) for i in range(300)] for t in range(4)}
    threads = [threading.Thread(target=lambda t=t: [log.append(r) for r in records[t]]) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got, why = _side_log_reopened(tmp_path).read()
    assert why is None and got[0] == b"start"
    for t in range(4):  # each thread's in its order, every one whole
        assert [r for r in got[1:] if r.startswith(b"%d-" % t)] == records[t]
    assert len(got) == 1 + 4 * 300


def _side_log_reopened(tmp_path, in_place=True):
    from sweepq.blobstore.sidelog import SideLog

    return SideLog(str(tmp_path), "t", in_place)


@pytest.mark.parametrize("in_place", [True, False])
def test_a_side_log_not_in_place_is_as_long_as_its_records(tmp_path, in_place):
    """A log not kept in place (a store whose syncs are not the change log's alone: a write
    that grows the file costs less than one over zeros) is as long as its records."""
    from sweepq.blobstore.sidelog import CHUNK

    log = _side_log(tmp_path, in_place=in_place)
    for i in range(100):
        log.append(b"r%03d" % i)
    size = (tmp_path / "sweepq-t").stat().st_size
    assert size == (CHUNK if in_place else 4 + 8 + 5 + 100 * (8 + 4))
    assert _side_log_reopened(tmp_path, in_place).read() == ([b"start", *[b"r%03d" % i for i in range(100)]], None)


@pytest.mark.parametrize("first, then", [(True, False), (False, True)])
def test_a_side_log_written_in_place_is_continued_growing_and_the_other_way(tmp_path, first, then):
    """A store reopened under another sync policy continues its change log at its logical end,
    whichever way it was written."""
    log = _side_log(tmp_path, in_place=first)
    log.append(b"one")
    log.close()
    again = _side_log_reopened(tmp_path, then)
    assert again.read() == ([b"start", b"one"], None)
    again.append(b"two")
    again.close()
    assert _side_log_reopened(tmp_path).read() == ([b"start", b"one", b"two"], None)


@pytest.mark.parametrize("in_place", [True, False])
@pytest.mark.parametrize("read_first", [True, False])
def test_a_reopened_side_log_continues_at_its_logical_end(tmp_path, read_first, in_place):
    log = _side_log(tmp_path, in_place=in_place)
    log.append(b"one")
    log.close()
    again = _side_log_reopened(tmp_path, in_place)
    if read_first:  # as the store does at open
        assert again.read() == ([b"start", b"one"], None)
    again.append(b"two")
    again.append(b"three")
    assert _side_log_reopened(tmp_path).read() == ([b"start", b"one", b"two", b"three"], None)


def test_a_side_log_of_the_older_form_without_zeros_is_continued(tmp_path):
    from sweepq.blobstore.sidelog import _frame

    (tmp_path / "sweepq-t").write_bytes(b"SQG1" + _frame(b"old") + _frame(b"older"))
    log = _side_log_reopened(tmp_path)
    log.append(b"new")
    assert _side_log_reopened(tmp_path).read() == ([b"old", b"older", b"new"], None)


def test_a_side_log_whose_write_fails_says_why_and_takes_nothing_more(tmp_path):
    """The append's write (compiled: one pwritev of the header and the record) failing: the
    log says why, takes no more records, and what it held before reads back whole."""
    log = _side_log(tmp_path, in_place=False)
    log.append(b"one")
    os.close(log._fd)  # the descriptor gone under it: the next write fails (EBADF)
    log.append(b"two")
    assert log.failed is not None and "Bad file descriptor" in log.failed
    log.append(b"three")  # taken by nothing
    log._fd = None  # already closed
    assert _side_log_reopened(tmp_path, False).read() == ([b"start", b"one"], None)


def test_a_side_log_write_that_makes_no_progress_fails_and_does_not_loop(tmp_path, monkeypatch):
    """A write that returns having written nothing (no regular file does; a limit on every
    loop) is an error, not a retry for ever."""
    from sweepq.blobstore import sidelog

    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        monkeypatch.setattr(os, "pwrite", lambda *a: 0)
        with pytest.raises(OSError, match="wrote nothing"):
            sidelog._write_at(fd, b"abc", 0)
    finally:
        os.close(fd)


_SHORT_WRITE = """
import os, resource, signal, sys
from sweepq.blobstore.sidelog import SideLog
log = SideLog(sys.argv[1], "t", False)
log.start(b"start")
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
size = os.path.getsize(log.path)
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 100, resource.RLIM_INFINITY))
log.append(b"a" * 50)  # fits
log.append(b"b" * 100)  # written in part: the rest is tried, and fails
print(log.failed)
"""


def test_a_side_log_write_cut_short_by_a_file_size_limit_fails_and_leaves_a_cut_tail(tmp_path):
    """A record written only in part (the file reached RLIMIT_FSIZE mid-write): the append
    writes the rest, which fails, so the log says why; reading stops at the record cut short
    (a cut tail, not damage) with every record before it."""
    import subprocess
    import sys

    child = [sys.executable, "-c", _SHORT_WRITE, str(tmp_path)]
    out = subprocess.run(child, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "File too large" in out.stdout
    assert (tmp_path / "sweepq-t").stat().st_size == len(b"SQG1") + 8 + 5 + 100  # up to the limit
    assert _side_log_reopened(tmp_path, False).read() == ([b"start", b"a" * 50], None)


def test_zeros_after_the_last_record_are_the_end_but_zeros_then_data_are_damage(tmp_path):
    log = _side_log(tmp_path)
    log.append(b"one")
    path = tmp_path / "sweepq-t"
    assert _side_log_reopened(tmp_path).read() == ([b"start", b"one"], None)
    data = bytearray(path.read_bytes())
    data[-1] = 1  # one byte that is not zero, far after a zero header
    path.write_bytes(bytes(data))
    got, why = _side_log_reopened(tmp_path).read()
    assert got == [b"start", b"one"] and why is not None and "damaged at byte 28" in why


def test_a_side_log_record_cut_at_the_end_of_the_file_is_a_cut_tail(tmp_path):
    log = _side_log(tmp_path)
    log.append(b"one")
    log.append(b"two-two-two")
    path = tmp_path / "sweepq-t"
    whole = 4 + 8 + 5 + 8 + 3
    path.write_bytes(path.read_bytes()[: whole + 8 + 4])  # truncated inside "two-two-two"
    assert _side_log_reopened(tmp_path).read() == ([b"start", b"one"], None)
    again = _side_log_reopened(tmp_path)  # the next append goes where the cut record began
    again.append(b"three")
    assert _side_log_reopened(tmp_path).read() == ([b"start", b"one", b"three"], None)


def test_a_record_written_in_place_and_torn_by_a_power_loss_is_a_cut_tail_a_flipped_bit_is_damage(tmp_path):
    log = _side_log(tmp_path)
    log.append(b"one")
    big = bytes(range(1, 256)) * 8
    log.append(big)
    path = tmp_path / "sweepq-t"
    data = bytearray(path.read_bytes())
    start = 4 + 8 + 5 + 8 + 3
    torn = bytearray(data)
    torn[1024 : start + 8 + len(big)] = bytes(start + 8 + len(big) - 1024)  # its sectors from 1024 on never written
    path.write_bytes(bytes(torn))
    assert _side_log_reopened(tmp_path).read() == ([b"start", b"one"], None)
    again = _side_log_reopened(tmp_path)
    again.append(b"after")  # over the torn record, whose bytes are zeroed first
    assert _side_log_reopened(tmp_path).read() == ([b"start", b"one", b"after"], None)
    flipped = bytearray(data)
    flipped[start + 100] ^= 0x04
    path.write_bytes(bytes(flipped))
    got, why = _side_log_reopened(tmp_path).read()
    assert got == [b"start", b"one"] and why is not None and f"damaged at byte {start}" in why
