"""Finds and loads libdeepinfer.so and declares the C API's signatures.

Where the library is looked for, first found wins:
  1. the source tree this package sits in: <repo>/python/deepinfer -> <repo>/build/libdeepinfer.so
     (what `./build.sh` / `make` builds);
  2. an installed prefix above the package: for each directory D above it,
     D/libdeepinfer.so.0 and D/lib/libdeepinfer.so.0 (`make install` puts the
     library in PREFIX/lib);
  3. the dynamic loader's own search (ctypes.util.find_library, then the soname).
"""
import ctypes as C
import ctypes.util
import os

from . import _structs as S

SONAME = "libdeepinfer.so.0"


def _candidates():
    pkg = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(pkg))
    yield os.path.join(repo, "build", "libdeepinfer.so")
    d = os.path.dirname(pkg)
    while True:
        for rel in (SONAME, "libdeepinfer.so", os.path.join("lib", SONAME), os.path.join("lib", "libdeepinfer.so")):
            yield os.path.join(d, rel)
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent


def _find():
    for path in _candidates():
        if os.path.isfile(path):
            return path
    return ctypes.util.find_library("deepinfer") or SONAME


def _check_init_writes(lib):
    """The library's *_init fill exactly sizeof(struct) bytes: fill a buffer
    larger than the ctypes struct with a pattern, run init, and check that the
    bytes past the struct are untouched and the defaults landed in the named
    fields. A struct that drifted from the header fails here, at import."""
    pad = 64
    for cls, init, check in (
        (S.SamplingParamsC, lib.deepinfer_sampling_params_init,
         lambda p: p.temperature == 1.0 and p.max_tokens == 16 and p.n == 1 and p.logprobs == -1
         and p.skip_special_tokens == 1 and p.top_p == 1.0),
        (S.EngineConfigC, lib.deepinfer_engine_config_init,
         lambda c: c.batch_invariant == -1 and c.async_scheduling == -1 and c.cuda_graphs == -1 and c.model is None),
    ):
        size = C.sizeof(cls)
        buf = (C.c_ubyte * (size + pad))(*([0xA5] * (size + pad)))
        init(C.cast(buf, C.POINTER(cls)))
        if any(b != 0xA5 for b in buf[size:]) or not check(cls.from_buffer(buf)):
            raise ImportError(f"deepinfer: {cls.__doc__} in python/deepinfer/_structs.py does not match the "
                              "library's (include/deepinfer.h changed?)")


def _declare(lib):
    P = C.POINTER
    sigs = {
        "deepinfer_status_name": (C.c_char_p, [C.c_int]),
        "deepinfer_version": (C.c_char_p, []),
        "deepinfer_sampling_params_init": (None, [P(S.SamplingParamsC)]),
        "deepinfer_engine_config_init": (None, [P(S.EngineConfigC)]),
        "deepinfer_engine_open": (C.c_int, [P(S.EngineConfigC), P(C.c_void_p), C.c_char_p, C.c_size_t]),
        "deepinfer_engine_close": (None, [C.c_void_p]),
        "deepinfer_engine_last_error": (C.c_char_p, [C.c_void_p]),
        "deepinfer_engine_plan": (None, [C.c_void_p, P(S.MemoryPlanC)]),
        "deepinfer_engine_plan_text": (C.c_char_p, [C.c_void_p]),
        "deepinfer_engine_vocab_size": (C.c_int32, [C.c_void_p]),
        "deepinfer_finish_reason_name": (C.c_char_p, [C.c_int]),
        "deepinfer_outputs_free": (None, [P(P(S.RequestOutputC)), C.c_size_t]),
        "deepinfer_generate": (C.c_int, [C.c_void_p, P(S.PromptC), C.c_size_t, P(S.SamplingParamsC), C.c_size_t,
                                         P(P(P(S.RequestOutputC)))]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


def load():
    path = _find()
    try:
        lib = C.CDLL(path)
    except OSError as exc:
        raise ImportError(f"deepinfer: cannot load libdeepinfer ({path}): {exc}; build it with ./build.sh "
                          "(or `make install` it)") from exc
    _declare(lib)
    _check_init_writes(lib)
    lib.path = path
    return lib


lib = load()
