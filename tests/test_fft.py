"""jnp.fft against numpy.fft: every transform, length kind (direct, mixed radix, power of two, Bluestein primes),
norm and axis choice on the PYTHON reference device, a representative set compiled on the CPU, the errors for bad
arguments, and derivatives (finite differences, a closed form) and batching, in every order of jit, grad, vmap."""
import functools
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
import tinyjx
import tinyjx.numpy as jnp
from tinyjx.numpy import fft as fft_module
from tinyjx.test_util import check_grads
from conftest import examples

pytestmark = pytest.mark.usefixtures('semantics_device')
RNG = np.random.default_rng(1)

def crandn(*shape):
  return (RNG.normal(size=shape) + 1j * RNG.normal(size=shape)).astype(np.complex64)

def assert_fft_close(got, want, tol=3e-5):
  """Within float32 rounding of an FFT: the error is relative to the largest value (errors spread over the output)."""
  got, want = np.asarray(got), np.asarray(want)
  assert got.shape == want.shape, (got.shape, want.shape)
  scale = max(1.0, float(np.abs(want).max()))
  assert float(np.abs(got - want).max()) <= tol * scale * max(1.0, np.log2(max(want.size, 2))), np.abs(got - want).max()

# lengths: trivial, direct matmuls, composites (mixed radix), powers of two, primes (direct and Bluestein)
LENGTHS = [1, 2, 3, 5, 8, 12, 16, 17, 30, 64, 96, 127, 131, 210, 256, 1009]

@pytest.mark.parametrize("n", LENGTHS)
def test_fft_and_ifft_against_numpy(n):
  x = crandn(2, n)
  for norm in (None, 'backward', 'ortho', 'forward'):
    assert_fft_close(jnp.fft.fft(jnp.asarray(x), norm=norm), np.fft.fft(x, norm=norm))
    assert_fft_close(jnp.fft.ifft(jnp.asarray(x), norm=norm), np.fft.ifft(x, norm=norm))

@pytest.mark.parametrize("n", [1, 2, 5, 8, 13, 30, 131])
def test_rfft_and_irfft_against_numpy(n):
  x = RNG.normal(size=(3, n)).astype(np.float32)
  for norm in (None, 'ortho', 'forward'):
    got = jnp.fft.rfft(jnp.asarray(x), norm=norm)
    assert got.dtype is jnp.complex64 and got.shape == (3, n // 2 + 1)
    assert_fft_close(got, np.fft.rfft(x, norm=norm))
    spectrum = np.fft.rfft(x, norm=norm).astype(np.complex64)
    assert_fft_close(jnp.fft.irfft(jnp.asarray(spectrum), n=n, norm=norm), np.fft.irfft(spectrum, n=n, norm=norm))
  spectrum = crandn(3, n // 2 + 1)   # the imaginary parts of the DC (and Nyquist) terms are ignored, as numpy's
  assert_fft_close(jnp.fft.irfft(jnp.asarray(spectrum), n=n), np.fft.irfft(spectrum, n=n))
  if n > 1: assert_fft_close(jnp.fft.irfft(jnp.asarray(spectrum)), np.fft.irfft(spectrum))   # n = 2 (m - 1)

@settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_shapes_axes_lengths_and_norms(data):
  shape = tuple(data.draw(st.lists(st.integers(1, 12), min_size=1, max_size=3), label="shape"))
  axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
  n = data.draw(st.one_of(st.none(), st.integers(1, 20)), label="n")
  norm = data.draw(st.sampled_from([None, 'backward', 'ortho', 'forward']), label="norm")
  kind = data.draw(st.sampled_from(['fft', 'ifft', 'rfft', 'irfft']), label="kind")
  x = crandn(*shape)
  if kind == 'rfft': x = x.real.copy()
  if kind == 'irfft' and n is None and shape[axis] == 1: n = 1   # numpy's default 2 (m - 1) is 0 points here
  got = getattr(jnp.fft, kind)(jnp.asarray(x), n=n, axis=axis, norm=norm)
  assert_fft_close(got, getattr(np.fft, kind)(x, n=n, axis=axis, norm=norm))

def test_n_crops_and_pads_and_axis_picks_the_axis():
  x = crandn(4, 6, 5)
  for n in (1, 3, 6, 11):
    for axis in (0, 1, -1):
      assert_fft_close(jnp.fft.fft(jnp.asarray(x), n=n, axis=axis), np.fft.fft(x, n=n, axis=axis))
      assert_fft_close(jnp.fft.ifft(jnp.asarray(x), n=n, axis=axis), np.fft.ifft(x, n=n, axis=axis))
      assert_fft_close(jnp.fft.rfft(jnp.asarray(x.real), n=n, axis=axis), np.fft.rfft(x.real, n=n, axis=axis))
      assert_fft_close(jnp.fft.irfft(jnp.asarray(x), n=n, axis=axis), np.fft.irfft(x, n=n, axis=axis))

def test_integer_and_real_inputs_give_complex64():
  assert jnp.fft.fft(jnp.arange(4)).dtype is jnp.complex64
  assert jnp.fft.fft(jnp.arange(4)).tolist() == [6, -2 + 2j, -2, -2 - 2j]
  assert jnp.fft.ifft(jnp.ones(4, jnp.float16)).dtype is jnp.complex64
  assert jnp.fft.irfft(jnp.ones(3, jnp.complex64)).dtype is jnp.float32

def test_multidimensional_transforms():
  x = crandn(3, 4, 5)
  r = x.real.copy()
  cases = [
    (jnp.fft.fftn, np.fft.fftn, x, {}), (jnp.fft.ifftn, np.fft.ifftn, x, {}),
    (jnp.fft.fftn, np.fft.fftn, x, {'axes': (0, 2)}), (jnp.fft.fftn, np.fft.fftn, x, {'s': (2, 7), 'axes': (0, 1)}),
    (jnp.fft.ifftn, np.fft.ifftn, x, {'s': (3, 3), 'axes': (-1, -2), 'norm': 'ortho'}),
    (jnp.fft.fft2, np.fft.fft2, x, {}), (jnp.fft.ifft2, np.fft.ifft2, x, {'norm': 'forward'}),
    (jnp.fft.fft2, np.fft.fft2, x, {'s': (6, 2)}), (jnp.fft.fft2, np.fft.fft2, x, {'axes': (0, 2)}),
    (jnp.fft.rfftn, np.fft.rfftn, r, {}), (jnp.fft.rfftn, np.fft.rfftn, r, {'axes': (0, 1), 's': (4, 6)}),
    (jnp.fft.rfft2, np.fft.rfft2, r, {}),
    (jnp.fft.irfftn, np.fft.irfftn, x, {}), (jnp.fft.irfftn, np.fft.irfftn, x, {'s': (3, 4, 8), 'axes': (0, 1, 2)}),
    (jnp.fft.irfft2, np.fft.irfft2, x, {'s': (4, 9)}),
  ]
  for i, (f, g, v, kw) in enumerate(cases):
    assert_fft_close(f(jnp.asarray(v), **kw), g(v, **kw))

def test_hermitian_transforms():
  x = crandn(7)
  for n in (None, 12, 13):
    assert_fft_close(jnp.fft.hfft(jnp.asarray(x), n=n), np.fft.hfft(x, n=n))
  r = RNG.normal(size=9).astype(np.float32)
  for norm in (None, 'ortho', 'forward'):
    assert_fft_close(jnp.fft.ihfft(jnp.asarray(r), norm=norm), np.fft.ihfft(r, norm=norm))

def test_round_trips():
  x = crandn(5, 24)
  assert_fft_close(jnp.fft.ifft(jnp.fft.fft(jnp.asarray(x))), x)
  assert_fft_close(jnp.fft.ifftn(jnp.fft.fftn(jnp.asarray(x), norm='ortho'), norm='ortho'), x)
  assert_fft_close(jnp.fft.irfft(jnp.fft.rfft(jnp.asarray(x.real)), n=24), x.real)

def test_frequencies_and_shifts():
  for n in (1, 4, 7, 10):
    for d in (1.0, 0.1):
      np.testing.assert_allclose(np.asarray(jnp.fft.fftfreq(n, d)), np.fft.fftfreq(n, d), rtol=1e-6)
      np.testing.assert_allclose(np.asarray(jnp.fft.rfftfreq(n, d)), np.fft.rfftfreq(n, d), rtol=1e-6)
  assert jnp.fft.fftfreq(4).dtype is jnp.float32 and jnp.fft.fftfreq(4, dtype=jnp.float16).dtype is jnp.float16
  x = np.arange(30).reshape(5, 6)
  for axes in (None, 0, 1, (0, 1), (1,)):
    assert np.array_equal(np.asarray(jnp.fft.fftshift(jnp.asarray(x), axes)), np.fft.fftshift(x, axes))
    assert np.array_equal(np.asarray(jnp.fft.ifftshift(jnp.asarray(x), axes)), np.fft.ifftshift(x, axes))
  assert jnp.fft.ifftshift(jnp.fft.fftshift(jnp.arange(7))).tolist() == list(range(7))

# ---------------------------------------------------------------- compiled

COMPILED = {
  'fft_direct': (lambda x: jnp.fft.fft(x), lambda x: np.fft.fft(x), (3, 5)),
  'fft_longest_direct': (lambda x: jnp.fft.fft(x), lambda x: np.fft.fft(x), (3, fft_module.DIRECT)),
  'fft_past_direct': (lambda x: jnp.fft.fft(x), lambda x: np.fft.fft(x), (3, fft_module.DIRECT + 1)),
  'fft2_pow2': (lambda x: jnp.fft.fft2(x), lambda x: np.fft.fft2(x), (64, 512)),
  'fft2_tiled_reorder': (lambda x: jnp.fft.fft2(x), lambda x: np.fft.fft2(x), (480, 96)),   # tile_transposes
  'fft_four_step': (lambda x: jnp.fft.ifft(x, norm='ortho'), lambda x: np.fft.ifft(x, norm='ortho'), (3, 4096)),
  'rfft2_pow2': (lambda x: jnp.fft.rfft2(jnp.real(x)), lambda x: np.fft.rfft2(x.real), (16, 64)),
  'irfft_pow2': (lambda x: jnp.fft.irfft(x, axis=0), lambda x: np.fft.irfft(x, axis=0), (9, 5)),
  'fftn_3d': (lambda x: jnp.fft.fftn(x), lambda x: np.fft.fftn(x), (4, 40, 36)),
  'fft_mixed_radix': (lambda x: jnp.fft.fft(x, norm='ortho'), lambda x: np.fft.fft(x, norm='ortho'), (2, 60)),
  'ifft_pow2': (lambda x: jnp.fft.ifft(x), lambda x: np.fft.ifft(x), (2, 256)),
  'fft_bluestein': (lambda x: jnp.fft.fft(x), lambda x: np.fft.fft(x), (2, 131)),
  'fft_node_1000': (lambda x: jnp.fft.fft(x), lambda x: np.fft.fft(x), (64, 1000)),
  'fft_recursion_11_13': (lambda x: jnp.fft.fft(x), lambda x: np.fft.fft(x), (2, 143)),
  'fft_recursion_nodes': (lambda x: jnp.fft.ifft(x), lambda x: np.fft.ifft(x), (2, 5632)),    # 512 x 11
  'rfft_half_45': (lambda x: jnp.fft.rfft(jnp.real(x)), lambda x: np.fft.rfft(x.real), (6, 90)),
  'rfft_odd_33': (lambda x: jnp.fft.rfft(jnp.real(x)), lambda x: np.fft.rfft(x.real), (6, 33)),
  'irfft_22': (lambda x: jnp.fft.irfft(x, n=22), lambda x: np.fft.irfft(x, n=22), (3, 12)),
  'rfft_axis0': (lambda x: jnp.fft.rfft(jnp.real(x), axis=0), lambda x: np.fft.rfft(x.real, axis=0), (12, 3)),
  'irfft': (lambda x: jnp.fft.irfft(x, n=10), lambda x: np.fft.irfft(x, n=10), (3, 6)),
  'fft2': (lambda x: jnp.fft.fft2(x), lambda x: np.fft.fft2(x), (8, 6)),
  'irfftn': (lambda x: jnp.fft.irfftn(x, s=(6, 8)), lambda x: np.fft.irfftn(x, s=(6, 8), axes=(0, 1)), (6, 5)),
}

@pytest.mark.parametrize("name", sorted(COMPILED))
def test_compiled_cpu_against_numpy(name, cpu):
  f, g, shape = COMPILED[name]
  x = crandn(*shape)
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    assert_fft_close(tinyjx.jit(f)(jnp.asarray(x)), g(x))

# ---------------------------------------------------------------- the FFT node

# (the shape of one plane, the axis): every kind of block tjx_fft takes (16 or 8 adjacent columns; whole rows,
# transposed in tiles; lane by lane), partial blocks, odd and even log2 n, a length past the tiles; lengths of 3, 5
# and 7 (radices 3, 5, 7 alone, first, last and between; a radix 2 or 4 that is not the last stage) in every kind
NODE_CASES = [((2,), -1), ((4,), -1), ((8,), -1), ((3, 16), -1), ((17, 32), -1), ((16, 64), -1), ((33, 512), -1),
              ((1, 2048), -1), ((64, 7), -2), ((32, 16), -2), ((128, 33), -2), ((5, 8, 3), -2), ((2, 16, 17, 2), -3),
              ((256, 1), -2), ((3, 1024, 5), -2),
              ((3,), -1), ((5,), -1), ((7,), -1), ((9, 6), -1), ((3, 105), -1), ((40, 1000), -1), ((9, 360), -1),
              ((7, 16), -2), ((15, 16), -2), ((12, 17), -2), ((1000, 17), -2), ((5, 30, 3), -2), ((2, 48, 7, 2), -3)]

@pytest.mark.parametrize("width", [None, 32])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_the_native_fft_gives_the_reference_bits(cpu, dt, width, monkeypatch):
  """The FFT node on the CPU (C: Stockham stages of radix 8 (4, 2) and of odd primes on vectors of transforms, the
  parts read and written interleaved) and on the PYTHON device (numpy, the same operations in the same order, on
  complex arrays or on interleaved parts) give the same bits, forward and inverse, within rounding of numpy.fft;
  with this machine's vector width (None: 64 bytes, 16 float32 lanes, with AVX-512) and with AVX2's 32 forced. (64
  forced on AVX2 takes GCC over a minute to compile.)"""
  from types import SimpleNamespace
  from tinyjx.devices import cpu as cpu_mod
  from tinyjx.devices.python import fft_packed
  if width:
    sources, *types = cpu_mod.NATIVE_ROUTINES['tjx_fft']
    forced = {sfx: f"#define TJX_FFT_BYTES {width}\n" + source for sfx, source in sources.items()}
    monkeypatch.setitem(cpu_mod.NATIVE_ROUTINES, 'tjx_fft', (forced, *types))
    monkeypatch.setattr(cpu_mod, '_linalg', functools.lru_cache(None)(cpu_mod._linalg.__wrapped__))
  for shape, axis in NODE_CASES:
    for inverse in (False, True):
      x = RNG.normal(size=shape + (2,)).astype(dt)
      scale = 1 / shape[axis] if inverse else 1.0
      node = SimpleNamespace(arg=(axis, inverse, scale))
      want = fft_packed(node, x)
      got = np.full_like(x, np.nan)
      cpu.fft(x, got, axis, inverse, scale)
      np.testing.assert_array_equal(got, want, err_msg=f"{shape} {axis} {inverse}")
      z = x[..., 0] + 1j * x[..., 1]
      np.testing.assert_array_equal(fft_packed(node, z.astype(np.result_type(dt, np.complex64))),
                                    want[..., 0] + 1j * want[..., 1])
      z = np.moveaxis(z, axis, -1)
      exact = np.moveaxis(np.fft.ifft(z) if inverse else np.fft.fft(z), -1, axis)
      err = np.abs(want[..., 0] + 1j * want[..., 1] - exact).max() / np.abs(exact).max()
      assert err < (1e-6 if dt == np.float32 else 1e-14), (shape, axis, inverse, err)

def test_the_fft_node_compiled_replayed_and_transformed(cpu):
  """jnp.fft's power-of-two transforms as FFT steps in a compiled program, native on the CPU: fft2 and a transform
  along the first axis match numpy at every call, and grad, jvp and vmap go through the node's rules (the transpose
  of a DFT is the DFT of the other sign)."""
  from tinyjx.lower.steps import FftStep
  f = tinyjx.jit(lambda z: (jnp.fft.fft2(z), jnp.fft.ifft(z, axis=1, norm='ortho')))
  for shape in ((16, 64), (32, 8)):
    zs = [crandn(*shape) for _ in range(3)]
    with tinyjx.Context(TINYJX_DEVICE='CPU'):
      got = [f(jnp.asarray(z)) for z in zs]
      exe = f.lower(jnp.asarray(zs[0])).compile().executable
    assert sum(isinstance(s, FftStep) and s.native is not None for s in exe.steps) == 3
    # the steps read the complex input where it lies and write the results as they are returned: no kernel copies
    # parts in or out, and none scales (ifft's norm is its step's factor)
    assert len(exe.kernels) == 0
    for (a, b), z in zip(got, zs):
      assert_fft_close(a, np.fft.fft2(z))
      assert_fft_close(b, np.fft.ifft(z, axis=1, norm='ortho'))
  # rfft of a real parameter: its step reads the parameter's memory as complex pairs (no kernel copies it into a
  # buffer of pairs); one kernel takes the frequencies apart; a parameter shaped otherwise, and a computed input, too
  r = tinyjx.jit(lambda x, y: (jnp.fft.rfft(x), jnp.fft.rfft2(y), jnp.fft.rfft(x * 2.0)))
  xs = [RNG.normal(size=(6, 32)).astype(np.float32) for _ in range(2)]
  y = RNG.normal(size=(4, 8, 16)).astype(np.float32)
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    got = [r(jnp.asarray(x), jnp.asarray(y)) for x in xs]
    exe = r.lower(jnp.asarray(xs[0]), jnp.asarray(y)).compile().executable
  steps = [s for s in exe.steps if isinstance(s, FftStep)]
  assert len(steps) == 4 and sum(v is not None for s in steps for v in s.views) == 2
  assert len(exe.kernels) == 4                      # x * 2.0, and the three rffts' separations
  for (a, b, c), x in zip(got, xs):
    assert_fft_close(a, np.fft.rfft(x)); assert_fft_close(b, np.fft.rfft2(y)); assert_fft_close(c, np.fft.rfft(2 * x))
  def loss(x): return jnp.sum(jnp.abs(jnp.fft.fft(x * jnp.arange(1.0, 9.0)[:, None], axis=0)) ** 2)
  x = RNG.normal(size=(8, 3)).astype(np.float32)
  # |F(x w)|^2 summed is n |x w|^2 (Parseval): its gradient 2 n w^2 x
  want = 2 * 8 * np.arange(1.0, 9.0)[:, None] ** 2 * x
  # (float32 error scales with the largest entry: one near 0 can miss any relative tolerance; 300 random x: at most
  # 2.8e-7 of the largest, and 8 of them failed rtol alone)
  atol = 1e-5 * np.abs(want).max()
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    np.testing.assert_allclose(tinyjx.jit(tinyjx.grad(loss))(jnp.asarray(x)), want, rtol=1e-4, atol=atol)
    np.testing.assert_allclose(tinyjx.vmap(tinyjx.grad(loss), in_axes=2)(jnp.asarray(np.stack([x, -x], 2))),
                               np.stack([want, -want]), rtol=1e-4, atol=atol)
  check_grads(lambda x: jnp.real(jnp.fft.ifft(jnp.fft.fft(x) * jnp.arange(16.0))), (x[:, 0].repeat(2),), order=2)

# ---------------------------------------------------------------- errors

def test_bad_arguments_raise_clear_errors():
  x = jnp.ones((2, 4))
  for n in (0, -3):
    with pytest.raises(ValueError, match=rf"invalid number of FFT data points \({n}\)"):
      jnp.fft.fft(x, n=n)
  with pytest.raises(ValueError, match=r"invalid number of FFT data points \(0\)"):
    jnp.fft.irfft(jnp.ones(1, jnp.complex64))
  with pytest.raises(ValueError, match="axis 2 is out of bounds for an array of ndim 2"):
    jnp.fft.fft(x, axis=2)
  with pytest.raises(ValueError, match="axes -3 is out of bounds"):
    jnp.fft.fftn(x, axes=(-3,))
  with pytest.raises(ValueError, match="Invalid norm value 'sideways'"):
    jnp.fft.fft(x, norm='sideways')
  with pytest.raises(TypeError, match="rfft takes a real input.*jnp.fft.fft"):
    jnp.fft.rfft(jnp.ones(4, jnp.complex64))
  with pytest.raises(ValueError, match="s and axes must have one length"):
    jnp.fft.fftn(x, s=(2, 2), axes=(0,))
  with pytest.raises(ValueError, match="repeated axis"):
    jnp.fft.fftn(x, axes=(0, 0))
  with pytest.raises(ValueError, match="0-d array"):
    jnp.fft.fft(jnp.asarray(1.0))
  with pytest.raises(TypeError, match="n must be an int"):
    jnp.fft.fft(x, n=2.5)
  with pytest.raises(ValueError, match=r"fftfreq: invalid number of FFT data points \(0\)"):
    jnp.fft.fftfreq(0)

# ---------------------------------------------------------------- derivatives and batching

def test_grad_of_the_power_spectrum_is_2n_x():
  """Parseval: sum |fft(x)|^2 = n sum x^2, so its gradient at a real x is 2 n x."""
  for n in (8, 12, 131):
    x = jnp.asarray(RNG.normal(size=n).astype(np.float32))
    g = tinyjx.grad(lambda x: jnp.sum(jnp.abs(jnp.fft.fft(x)) ** 2))(x)
    np.testing.assert_allclose(np.asarray(g), 2 * n * np.asarray(x), rtol=2e-4, atol=2e-4 * n)
  z = jnp.asarray(crandn(6))   # for a complex z, JAX's gradient is the conjugate: 2 n conj(z)
  g = tinyjx.grad(lambda z: jnp.sum(jnp.abs(jnp.fft.fft(z)) ** 2))(z)
  np.testing.assert_allclose(np.asarray(g), 12 * np.conj(np.asarray(z)), rtol=1e-4, atol=1e-4)

def test_gradients_as_jax_gives_them():
  """Values from jax.grad (JAX 0.10): irfft reads conj-symmetric halves, rfft's gradient folds them back."""
  g = tinyjx.grad(lambda z: jnp.sum(jnp.fft.irfft(z, n=6) * jnp.arange(6.0)))(jnp.ones(4, jnp.complex64) * (1 + 1j))
  np.testing.assert_allclose(np.asarray(g), [2.5, -1 - 1.7320508j, -1 - 0.57735026j, -0.5], rtol=1e-5, atol=1e-6)
  g = tinyjx.grad(lambda x: jnp.sum(jnp.real(jnp.fft.rfft(x)) + 2 * jnp.imag(jnp.fft.rfft(x))))(jnp.arange(6.0))
  np.testing.assert_allclose(np.asarray(g), [4, -3.4641016, 1, 0, 1, 3.4641016], rtol=1e-5, atol=1e-6)
  # power-of-two lengths: rfft and irfft as half-length complex transforms (FFT nodes)
  g = tinyjx.grad(lambda z: jnp.sum(jnp.fft.irfft(z, n=8) * jnp.arange(8.0)))(jnp.ones(5, jnp.complex64) * (1 + 1j))
  np.testing.assert_allclose(np.asarray(g), [3.5, -1 - 2.4142137j, -1 - 1j, -1 - 0.41421354j, -0.5], rtol=1e-5,
                             atol=1e-6)
  g = tinyjx.grad(lambda x: jnp.sum(jnp.real(jnp.fft.rfft(x)) + 2 * jnp.imag(jnp.fft.rfft(x))))(jnp.arange(8.0))
  np.testing.assert_allclose(np.asarray(g), [5, -4.8284273, 1, -0.8284271, 1, 0.8284271, 1, 4.8284273], rtol=1e-5,
                             atol=1e-6)

@pytest.mark.parametrize("name", ['fft', 'ifft_ortho', 'rfft', 'irfft', 'fft2', 'rfftn', 'bluestein', 'fft_pow2',
                                  'rfft_pow2', 'irfft_pow2', 'four_step'])
def test_derivatives_against_finite_differences(name):
  f, x = {
    'fft': (lambda z: jnp.fft.fft(z * z), crandn(6)),
    'ifft_ortho': (lambda z: jnp.fft.ifft(z, n=5, norm='ortho'), crandn(2, 4)),
    'rfft': (lambda x: jnp.fft.rfft(jnp.sin(x)), RNG.normal(size=7).astype(np.float32)),
    'irfft': (lambda z: jnp.fft.irfft(z, n=6), crandn(4)),
    'fft2': (lambda z: jnp.fft.fft2(z, norm='forward'), crandn(3, 4)),
    'rfftn': (lambda x: jnp.fft.rfftn(x * x), RNG.normal(size=(3, 4)).astype(np.float32)),
    'bluestein': (lambda z: jnp.fft.fft(z) / 10, crandn(131)),
    'fft_pow2': (lambda z: jnp.fft.ifft(jnp.fft.fft(z * z, axis=0) * z, norm='forward'), crandn(8, 3)),
    'rfft_pow2': (lambda x: jnp.fft.rfft(jnp.sin(x), axis=0), RNG.normal(size=(16, 2)).astype(np.float32)),
    'irfft_pow2': (lambda z: jnp.fft.irfft(z * z, n=8), crandn(5)),
    'four_step': (lambda z: jnp.fft.fft(z) / 16, crandn(256)),
  }[name]
  # in x64: a second-order finite difference of a float32 FFT lands within half a percent of the truth, too near the
  # check's float32 tolerance to pass on every path that evaluates it
  tinyjx.config.update('jax_enable_x64', True)
  try:
    x = x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)
    check_grads(f, (jnp.asarray(x),), order=1 if name in ('bluestein', 'four_step') else 2)
  finally:
    tinyjx.config.update('jax_enable_x64', False)

def spectral_loss(x, w):
  return jnp.sum(jnp.abs(jnp.fft.rfft(x * w)) ** 2) + jnp.sum(jnp.real(jnp.fft.fft(x)) * w)

def test_jit_grad_vmap_agree_in_every_order():
  xs, w = jnp.asarray(RNG.normal(size=(4, 10)).astype(np.float32)), jnp.asarray(RNG.normal(size=10).astype(np.float32))
  g = tinyjx.grad(spectral_loss)
  loop = np.stack([np.asarray(g(xs[i], w)) for i in range(4)])
  versions = {
    'vmap(grad)': tinyjx.vmap(g, (0, None))(xs, w), 'jit(vmap(grad))': tinyjx.jit(tinyjx.vmap(g, (0, None)))(xs, w),
    'vmap(jit(grad))': tinyjx.vmap(tinyjx.jit(g), (0, None))(xs, w),
    'vmap(grad(jit))': tinyjx.vmap(tinyjx.grad(tinyjx.jit(spectral_loss)), (0, None))(xs, w),
    'grad(sum(vmap))': tinyjx.grad(lambda x: jnp.sum(tinyjx.vmap(spectral_loss, (0, None))(x, w)))(xs),
  }
  for name, v in versions.items(): np.testing.assert_allclose(np.asarray(v), loop, rtol=1e-4, atol=1e-3, err_msg=name)

def test_vmap_of_transforms_matches_a_loop():
  zs = crandn(3, 2, 12)
  for f in (lambda z: jnp.fft.fft(z, axis=0), lambda z: jnp.fft.ifft2(z), lambda z: jnp.fft.irfft(z, n=7)):
    batched = tinyjx.vmap(f)(jnp.asarray(zs))
    assert_fft_close(batched, np.stack([np.asarray(f(jnp.asarray(z))) for z in zs]))
    assert_fft_close(tinyjx.vmap(f, in_axes=2, out_axes=1)(jnp.asarray(zs)),
                     np.stack([np.asarray(f(jnp.asarray(zs[:, :, i]))) for i in range(12)], 1))

def test_jvp_is_the_transform_of_the_tangent():
  """The FFT is linear: its jvp is the FFT of the tangent, its vjp the transpose (the FFT again, unconjugated)."""
  z, t = jnp.asarray(crandn(10)), jnp.asarray(crandn(10))
  _, tangent = tinyjx.jvp(jnp.fft.fft, (z,), (t,))
  assert_fft_close(tangent, np.fft.fft(np.asarray(t)))
  _, f_vjp = tinyjx.vjp(jnp.fft.fft, z)
  assert_fft_close(f_vjp(t)[0], np.fft.fft(np.asarray(t)))   # the DFT matrix is symmetric

def test_lengths_choose_the_documented_algorithm(monkeypatch):
  """Lengths of 2, 3, 5 and 7 are one FFT node (past FOUR_STEP, or from 256 points in one vector, two levels of
  nodes), other small lengths one matmul, other composites recurse, large primes take Bluestein's detour through
  2^k."""
  def count(n, what):
    return str(tinyjx.make_jaxpr(jnp.fft.fft)(jnp.ones(n, jnp.complex64))).count(what)
  assert count(2, 'fft[') == count(fft_module.DIRECT, 'fft[') == count(128, 'fft[') == 1
  assert count(fft_module.DIRECT, 'dot_general') == 0
  assert count(256, 'fft[') == 2 and count(1 << 13, 'fft[') == 2                          # four-step
  monkeypatch.setattr(fft_module, 'FOUR_STEP', 256)
  assert count(1 << 17, 'fft[') == 3                       # 256 x 512, and 512 = 16 x 32 again
  monkeypatch.undo()
  assert count(30, 'fft[') == count(2 * 3 * 5 * 7, 'fft[') == 1 and count(30, 'dot_general') == 0
  assert count(1000, 'fft[') == count(5000, 'fft[') == 2   # four-step (one vector; past FOUR_STEP): 25 x 40, 50 x 100
  assert count(22, 'dot_general') == 1 and count(22, 'fft[') == 0
  assert count(143, 'dot_general') == 2                   # 143 = 11 x 13: two levels of small matmuls
  assert count(11 * 200, 'dot_general') == 1 and count(11 * 200, 'fft[') == 1   # the node's length, then 11
  # 512 >= 2 * 131 - 1: two transforms of 512 points, each two levels of nodes (one vector)
  assert count(131, 'fft[') == 4 and 'c64[512]' in str(tinyjx.make_jaxpr(jnp.fft.fft)(jnp.ones(131)))

def test_docstring_examples():
  import doctest
  result = doctest.testmod(fft_module, optionflags=doctest.ELLIPSIS)
  assert result.attempted >= 3 and result.failed == 0
