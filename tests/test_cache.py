"""The kernel cache's files are written whole: processes that build the same kernel at
once (two test workers, two compiles of one model) share a cache folder."""

import threading

from fusion_compiler.backends.cache import write_whole


def test_a_reader_never_sees_a_file_half_written(tmp_path) -> None:
    path = tmp_path / "kernel.cubin"
    versions = (b"a" * (1 << 20), b"b" * (1 << 20))
    write_whole(path, versions[0])
    seen, done = set(), threading.Event()

    def read() -> None:
        while not done.is_set():
            data = path.read_bytes()
            seen.add((len(data), data[:1], data[-1:]))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(200):
            write_whole(path, versions[i % 2])
    finally:
        done.set()
        reader.join()
    assert seen <= {(1 << 20, b"a", b"a"), (1 << 20, b"b", b"b")}, seen
    assert [p.name for p in tmp_path.iterdir()] == ["kernel.cubin"]  # no scratch left


def test_text_is_written_as_utf8(tmp_path) -> None:
    path = tmp_path / "kernel.py"
    write_whole(path, "# généré\n")
    assert path.read_text(encoding="utf-8") == "# généré\n"
