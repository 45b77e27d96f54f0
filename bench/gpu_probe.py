"""gpu_probe: tinyjx on a GPU device at sizes that fill the chip, against the card's own ceilings.

`python3 bench/gpu_probe.py [--device CUDA|CL]` prints, for each workload, tinyjx's median time, its GFLOP/s or GB/s,
its error against float64 numpy, and the fraction of the ceiling the card reaches through PyTorch on the same GPU
(a device-to-device copy for bandwidth, a float32 matrix product with TF32 off for arithmetic) where PyTorch with
CUDA is importable; without it the ceilings are left out. Complements `bench/bench.py --device`, whose sizes are
the CPU workloads'.
"""
from __future__ import annotations
import argparse, os, sys
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import median_time   # noqa: E402  (bench/bench.py: the median of timed calls after a warm-up call)

def ceilings() -> dict:
  """The card's copy bandwidth (bytes read plus written) and float32 matmul rate, measured through PyTorch."""
  try:
    import torch
    if not torch.cuda.is_available(): return {}
  except Exception:
    return {}
  a = torch.empty(1 << 28, dtype=torch.float32, device='cuda')
  b = torch.empty_like(a)
  copy = median_time(lambda: (b.copy_(a), torch.cuda.synchronize()), 10)
  torch.backends.cuda.matmul.allow_tf32 = False
  x, y = torch.randn(8192, 8192, device='cuda'), torch.randn(8192, 8192, device='cuda')
  mm = median_time(lambda: (x @ y, torch.cuda.synchronize()), 5)
  return {'GB/s': 2 * a.numel() * 4 / copy / 1e9, 'GFLOP/s': 2 * 8192 ** 3 / mm / 1e9}

def rel_err(got, want) -> float:
  want = np.asarray(want, np.float64)
  return float(np.linalg.norm(np.asarray(got, np.float64) - want) / max(np.linalg.norm(want), 1e-30))

def workloads(rng, small: bool):
  """name -> (jitted function, numpy inputs, float64 reference, flops, bytes moved at least); `small`: sizes for
  a quick check on a CPU-backed device."""
  import tinyjx, tinyjx.numpy as jnp
  from tinyjx import nn
  out = {}
  for n in ((64, 257) if small else (1024, 4096)):
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    out[f'matmul {n}'] = (tinyjx.jit(jnp.matmul), (a, b), a.astype(np.float64) @ b, 2 * n ** 3, None)
  n = 1 << (16 if small else 26)
  x, s, t = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
  y = x.astype(np.float64) * s + t
  gelu = 0.5 * y * (1 + np.tanh(0.7978845608 * (y + 0.044715 * y ** 3)))
  size = f"{n >> 20}M" if n >> 20 else str(n)
  gelu_f = tinyjx.jit(lambda x, s, t: nn.gelu(x * s + t, approximate=True))
  out[f'gelu {size}'] = (gelu_f, (x, s, t), gelu, None, 16 * n)
  m = rng.standard_normal((64 if small else 16384, 1024), dtype=np.float32)
  e = np.exp(m - m.max(1, keepdims=True), dtype=np.float64)
  softmax = tinyjx.jit(lambda v: nn.softmax(v, axis=-1))
  out[f'softmax {m.shape[0]}x1024'] = (softmax, (m,), e / e.sum(1, keepdims=True), None, 8 * m.size)
  out[f'sum {size}'] = (tinyjx.jit(jnp.sum), (x,), x.astype(np.float64).sum(), None, 4 * n)
  return out

def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument('--device', default='CUDA', type=str.upper)
  ap.add_argument('--small', action='store_true', help='small sizes: a quick check of the script on any device')
  args = ap.parse_args()
  import tinyjx
  peak = ceilings()
  print("ceilings (PyTorch on this GPU): " + (", ".join(f"{v:,.0f} {k}" for k, v in peak.items()) or "not measured"))
  print(f"{'workload':22s}{'ms':>10s}{'rate':>16s}{'of ceiling':>12s}{'rel err':>10s}")
  with tinyjx.Context(TINYJX_DEVICE=args.device):
    dev = tinyjx.devices(args.device.lower())[0]
    for name, (f, inputs, want, flops, nbytes) in workloads(np.random.default_rng(0), args.small).items():
      xs = [tinyjx.device_put(v, dev) for v in inputs]
      err = rel_err(f(*xs), want)
      t = median_time(lambda: f(*xs).block_until_ready(), 10)
      unit, rate = ('GFLOP/s', flops / t / 1e9) if flops else ('GB/s', nbytes / t / 1e9)
      share = f"{rate / peak[unit]:.1%}" if unit in peak else '-'
      print(f"{name:22s}{t * 1e3:10.3f}{rate:11,.1f} {unit:>4s}{share:>12s}{err:10.1e}", flush=True)

if __name__ == '__main__':
  main()
