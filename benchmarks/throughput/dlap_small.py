"""Per-draw cost of ``noise.discrete_laplace(rng, scale, size)`` at small and large sizes (the
private-keys driver draws vector counters of dimension 1-10). Each call gets a fresh derived
seeded source, as the counters do. Usage: ``python benchmarks/throughput/dlap_small.py`` (an
older checkout: ``PYTHONPATH=<it>``). Prints µs per call and µs per drawn value."""
import time

from beam_dp import noise

SCALES = [2.0, 7.3]
for scale in SCALES:
    for size in [1, 4, 16, 64, 10_000]:
        calls = max(3, 20_000 // size) if size < 10_000 else 20
        rngs = [noise.seeded(5).derive(i) for i in range(calls)]
        t = time.perf_counter()
        for rng in rngs:
            noise.discrete_laplace(rng, scale, size)
        dt = (time.perf_counter() - t) / calls
        print(f'scale={scale:<5} size={size:>6}: {dt * 1e6:9.1f} us/call '
              f'{dt * 1e6 / size:8.2f} us/value')
