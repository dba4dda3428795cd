"""A thin ctypes layer over the system's libbpf (``libbpf.so.1``): just what the plugin uses.

No BCC and no compiler at run time: the BPF object is compiled when the package is built
(``compile_bpf``) and libbpf relocates it against the running kernel's BTF on
load. libbpf 1.x returns NULL and sets errno for functions that return pointers, and a negative
errno for those that return ints; both become :class:`BpfError` here, with libbpf's own diagnostics
routed to this module's logger instead of stderr.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import logging
import os
import platform
from collections.abc import Callable, Iterator
from pathlib import Path

log = logging.getLogger(__name__)
LIBRARY = "libbpf.so.1"

_vp = ctypes.c_void_p
_PRINT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_char_p, _vp)
_SAMPLE = ctypes.CFUNCTYPE(ctypes.c_int, _vp, _vp, ctypes.c_size_t)


class BpfError(OSError):
    """A libbpf call failed; ``errno`` says why (EPERM: no CAP_BPF/CAP_PERFMON)."""


class _UprobeOpts(ctypes.Structure):
    # struct bpf_uprobe_opts of libbpf 1.x (its `sz` field makes later versions accept it)
    _fields_ = (("sz", ctypes.c_size_t), ("ref_ctr_offset", ctypes.c_size_t),
                ("bpf_cookie", ctypes.c_uint64), ("retprobe", ctypes.c_bool),
                ("func_name", ctypes.c_char_p))


def _declare(lib: ctypes.CDLL) -> None:
    for name, restype, argtypes in (
        ("libbpf_set_print", _vp, [_PRINT]),
        ("bpf_object__open_file", _vp, [ctypes.c_char_p, _vp]),
        ("bpf_object__load", ctypes.c_int, [_vp]),
        ("bpf_object__close", None, [_vp]),
        ("bpf_object__find_program_by_name", _vp, [_vp, ctypes.c_char_p]),
        ("bpf_object__find_map_by_name", _vp, [_vp, ctypes.c_char_p]),
        ("bpf_map__fd", ctypes.c_int, [_vp]),
        ("bpf_map__set_max_entries", ctypes.c_int, [_vp, ctypes.c_uint32]),
        ("bpf_program__attach", _vp, [_vp]),
        ("bpf_program__attach_uprobe_opts", _vp,
         [_vp, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(_UprobeOpts)]),
        ("bpf_link__destroy", ctypes.c_int, [_vp]),
        ("bpf_map_lookup_elem", ctypes.c_int, [ctypes.c_int, _vp, _vp]),
        ("bpf_map_update_elem", ctypes.c_int, [ctypes.c_int, _vp, _vp, ctypes.c_uint64]),
        ("bpf_map_delete_elem", ctypes.c_int, [ctypes.c_int, _vp]),
        ("bpf_map_get_next_key", ctypes.c_int, [ctypes.c_int, _vp, _vp]),
        ("ring_buffer__new", _vp, [ctypes.c_int, _SAMPLE, _vp, _vp]),
        ("ring_buffer__free", None, [_vp]),
        ("ring_buffer__consume", ctypes.c_int, [_vp]),
        ("ring_buffer__epoll_fd", ctypes.c_int, [_vp]),
    ):
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes


LIBBPF_DEBUG = 2  # enum libbpf_print_level: WARN 0, INFO 1, DEBUG 2
_libc = ctypes.CDLL(None)
_vsnprintf = _libc.vsnprintf
_vsnprintf.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, _vp]
# On x86-64 a va_list argument is a pointer, which vsnprintf takes as it came; elsewhere only
# the format is shown.
_EXPANDS = platform.machine() == "x86_64"


def _route_print(level: int, text: bytes | None, args: int | None) -> int:
    # libbpf's warnings (a verifier log, a symbol not found) go to our debug log: the failing
    # call raises a BpfError with errno, which is what the agent reports.
    if not text or level >= LIBBPF_DEBUG or not log.isEnabledFor(logging.DEBUG):
        return 0
    if _EXPANDS and args:
        buffer = ctypes.create_string_buffer(4096)
        _vsnprintf(buffer, len(buffer), text, args)
        text = buffer.value
    log.debug("libbpf: %s", text.decode(errors="replace").rstrip())
    return 0


_PRINT_CALLBACK = _PRINT(_route_print)  # held for the life of the process: libbpf keeps it


@functools.cache
def load_library() -> ctypes.CDLL:
    """libbpf, loaded once. Raises OSError (with the loader's reason) when it is missing."""
    lib = ctypes.CDLL(LIBRARY, use_errno=True)
    _declare(lib)
    lib.libbpf_set_print(_PRINT_CALLBACK)
    return lib


def _failed(what: str, code: int | None = None) -> BpfError:
    number = -code if code is not None and code < 0 else ctypes.get_errno() or errno.EINVAL
    return BpfError(number, f"{what}: {os.strerror(number)}")


class Link:
    """An attached program; :meth:`destroy` detaches it."""

    def __init__(self, lib: ctypes.CDLL, pointer: int) -> None:
        self._lib = lib
        self._pointer: int | None = pointer

    def destroy(self) -> None:
        pointer, self._pointer = self._pointer, None
        if pointer is not None:
            self._lib.bpf_link__destroy(pointer)


class Program:
    def __init__(self, lib: ctypes.CDLL, pointer: int, name: str) -> None:
        self._lib = lib
        self._pointer = pointer
        self.name = name

    def attach(self) -> Link:
        """Attach where the program's section says (a tracepoint, here)."""
        link = self._lib.bpf_program__attach(self._pointer)
        if not link:
            raise _failed(f"attach {self.name}")
        return Link(self._lib, link)

    def attach_uprobe(self, binary: Path, function: str, *, retprobe: bool = False) -> Link:
        """Attach to ``function`` in the ELF file ``binary``, in every process that maps it."""
        options = _UprobeOpts(ctypes.sizeof(_UprobeOpts), 0, 0, retprobe, function.encode())
        link = self._lib.bpf_program__attach_uprobe_opts(
            self._pointer, -1, os.fsencode(binary), 0, ctypes.byref(options))
        if not link:
            raise _failed(f"attach {self.name} to {function} in {binary}")
        return Link(self._lib, link)


class Map:
    def __init__(self, lib: ctypes.CDLL, pointer: int, name: str) -> None:
        self._lib = lib
        self._pointer = pointer
        self.name = name

    @property
    def fd(self) -> int:
        return int(self._lib.bpf_map__fd(self._pointer))

    def set_max_entries(self, entries: int) -> None:
        """Before :meth:`BpfObject.load` only."""
        code = self._lib.bpf_map__set_max_entries(self._pointer, entries)
        if code < 0:
            raise _failed(f"resize map {self.name}", code)

    def lookup(self, key: ctypes.Structure | ctypes._SimpleCData,  # type: ignore[type-arg]
               value: ctypes.Structure | ctypes._SimpleCData) -> bool:  # type: ignore[type-arg]
        """Fill ``value`` with the entry of ``key``; False when there is none."""
        code = self._lib.bpf_map_lookup_elem(self.fd, ctypes.byref(key), ctypes.byref(value))
        if code == -errno.ENOENT:
            return False
        if code < 0:
            raise _failed(f"lookup in map {self.name}", code)
        return True

    def update(self, key: ctypes.Structure | ctypes._SimpleCData,  # type: ignore[type-arg]
               value: ctypes.Structure | ctypes._SimpleCData) -> None:  # type: ignore[type-arg]
        code = self._lib.bpf_map_update_elem(self.fd, ctypes.byref(key), ctypes.byref(value), 0)
        if code < 0:
            raise _failed(f"update map {self.name}", code)

    def delete(self, key: ctypes.Structure | ctypes._SimpleCData) -> None:  # type: ignore[type-arg]
        code = self._lib.bpf_map_delete_elem(self.fd, ctypes.byref(key))
        if code < 0 and code != -errno.ENOENT:
            raise _failed(f"delete from map {self.name}", code)

    def keys(self, key_type: type[ctypes.c_uint32]) -> Iterator[int]:
        """The keys of a map keyed by a plain integer, read with the kernel's key walk."""
        fd = self.fd
        current = key_type()
        following = key_type()
        previous: ctypes.c_uint32 | None = None
        while True:
            code = self._lib.bpf_map_get_next_key(
                fd, None if previous is None else ctypes.byref(previous), ctypes.byref(following))
            if code == -errno.ENOENT:
                return
            if code < 0:
                raise _failed(f"walk map {self.name}", code)
            current.value = following.value
            yield int(current.value)
            previous = current


class RingBuffer:
    """A BPF ring buffer: :attr:`epoll_fd` turns readable when records are waiting, and
    :meth:`consume` hands each to ``on_record`` as bytes, without blocking."""

    def __init__(self, lib: ctypes.CDLL, source: Map, on_record: Callable[[bytes], None]) -> None:
        self._lib = lib

        def sample(_context: int | None, data: int | None, size: int) -> int:
            if data:
                on_record(ctypes.string_at(data, size))
            return 0

        self._callback = _SAMPLE(sample)  # held: libbpf keeps the pointer
        pointer = lib.ring_buffer__new(source.fd, self._callback, None, None)
        if not pointer:
            raise _failed(f"ring buffer on map {source.name}")
        self._pointer: int | None = pointer

    @property
    def epoll_fd(self) -> int:
        return int(self._lib.ring_buffer__epoll_fd(self._pointer))

    def consume(self) -> int:
        if self._pointer is None:
            return 0
        code = self._lib.ring_buffer__consume(self._pointer)
        if code < 0:
            raise _failed("ring buffer consume", code)
        return int(code)

    def free(self) -> None:
        pointer, self._pointer = self._pointer, None
        if pointer is not None:
            self._lib.ring_buffer__free(pointer)


class BpfObject:
    """One BPF object file: open, optionally resize maps, load (verify), then attach."""

    def __init__(self, path: Path) -> None:
        self._lib = load_library()
        pointer = self._lib.bpf_object__open_file(os.fsencode(path), None)
        if not pointer:
            raise _failed(f"open {path}")
        self._pointer: int | None = pointer
        self.path = path

    def load(self) -> None:
        code = self._lib.bpf_object__load(self._pointer)
        if code < 0:
            raise _failed(f"load {self.path.name}", code)

    def program(self, name: str) -> Program:
        pointer = self._lib.bpf_object__find_program_by_name(self._pointer, name.encode())
        if not pointer:
            raise BpfError(errno.ENOENT, f"no program {name} in {self.path.name}")
        return Program(self._lib, pointer, name)

    def map(self, name: str) -> Map:
        pointer = self._lib.bpf_object__find_map_by_name(self._pointer, name.encode())
        if not pointer:
            raise BpfError(errno.ENOENT, f"no map {name} in {self.path.name}")
        return Map(self._lib, pointer, name)

    def ring_buffer(self, name: str, on_record: Callable[[bytes], None]) -> RingBuffer:
        return RingBuffer(self._lib, self.map(name), on_record)

    def close(self) -> None:
        pointer, self._pointer = self._pointer, None
        if pointer is not None:
            self._lib.bpf_object__close(pointer)
