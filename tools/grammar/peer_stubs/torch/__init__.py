# Stand-in for torch when only xgrammar's compiler and matcher are used (bitmasks go through DLPack).
import numpy as _np
int8 = _np.int8
int16 = _np.int16
int32 = _np.int32
int64 = _np.int64
uint8 = _np.uint8
uint16 = _np.uint16
uint32 = _np.uint32
uint64 = _np.uint64
float16 = _np.float16
float64 = _np.float64
bfloat16 = _np.float16
float8_e4m3fn = _np.uint8
float8_e5m2 = _np.uint8
float8_e4m3fnuz = _np.uint8
float8_e5m2fnuz = _np.uint8
float8_e8m0fnu = _np.uint8
float4_e2m1fn_x2 = _np.uint8
complex64 = _np.complex64
complex128 = _np.complex128
bool = _np.bool_
float32 = _np.float32
class Tensor:  # only used in annotations
    pass
class dtype:
    pass
class device:
    def __init__(self, *a, **k): pass
def tensor(v, dtype=None, **k): return _np.array(v, dtype=dtype)
def full(shape, v, dtype=None, **k): return _np.full(shape, v, dtype=dtype)
def empty(shape, dtype=None, **k): return _np.empty(shape, dtype=dtype)
def zeros(shape, dtype=None, **k): return _np.zeros(shape, dtype=dtype)
class _Cuda:
    @staticmethod
    def is_available(): return False
cuda = _Cuda()
__version__ = "0.0-stub"
LongTensor = FloatTensor = IntTensor = BoolTensor = Tensor
def __getattr__(name):  # any other name used only in annotations
    return Tensor
