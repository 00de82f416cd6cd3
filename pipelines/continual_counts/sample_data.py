"""A deterministic synthetic stream of bike rides: the job's embedded sample data.

``python -m pipelines.continual_counts.sample_data`` regenerates ``data/rides.avro`` and
``data/stations.txt`` (the committed files are its output; regenerating gives the same bytes).

The model (test data, not DP noise, so a seeded numpy generator is fine):

* 50 public stations with Zipf-like popularity; 3 of them are idle (new, no rides yet) and one
  non-public pop-up station receives a few rides (the job dead-letters them: not a public key);
* riders are the privacy unit. Commuters ride from home in the morning and from work in the
  evening on the weekday; leisure riders take a few rides at midday and in the evening; a few
  heavy riders (couriers) ride many times from many stations, which the contribution bounds clip;
* two days (a Sunday and a Monday, UTC) at one-hour steps, so daily and hourly seasonality show;
* a handful of malformed records (empty rider id, negative or NaN duration) for the dead-letter
  path.
"""

import argparse
import datetime
import os
from typing import List, Tuple

import fastavro
import numpy as np

from pipelines.continual_counts.events import EVENT_SCHEMA
from pipelines.continual_counts.events import RideEvent
from pipelines.continual_counts.events import event_to_avro

__all__ = [
    'DATA_DIR',
    'SAMPLE_END',
    'SAMPLE_START',
    'SAMPLE_STEP_SECONDS',
    'STATIONS_PATH',
    'RIDES_PATH',
    'generate',
    'load_stations',
    'stations',
    'write',
]

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data')
RIDES_PATH = os.path.join(DATA_DIR, 'rides.avro')
STATIONS_PATH = os.path.join(DATA_DIR, 'stations.txt')

SAMPLE_START = datetime.datetime(2024, 6, 2, tzinfo=datetime.timezone.utc)   # a Sunday
SAMPLE_DAYS = 2
SAMPLE_STEP_SECONDS = 3600
SAMPLE_END = SAMPLE_START + datetime.timedelta(days=SAMPLE_DAYS)
SEED = 20240602

NUM_STATIONS = 50
NUM_IDLE = 3
POP_UP_STATION = 'Pop-up: Festival Grounds'
NUM_COMMUTERS = 9000
NUM_LEISURE = 6000
NUM_COURIERS = 60

_STREETS = ('Market', 'Mission', 'Howard', 'Folsom', 'Harrison', 'Bryant', 'Valencia', 'Guerrero',
            'Dolores', 'Church', 'Castro', 'Divisadero', 'Fillmore', 'Webster', 'Octavia',
            'Gough', 'Franklin', 'Van Ness', 'Polk', 'Larkin', 'Hyde', 'Leavenworth', 'Jones',
            'Taylor', 'Mason')
_CROSS = ('1st St', '2nd St', '3rd St', '4th St', '5th St', '7th St', '9th St', '11th St',
          '16th St', '18th St', '20th St', '24th St', 'Oak St', 'Fell St', 'Hayes St', 'Grove St',
          'Fulton St', 'McAllister St', 'Geary Blvd', 'Sutter St', 'Bush St', 'Pine St',
          'California St', 'Clay St', 'Union St')

_MICROS = 1_000_000


def stations() -> List[str]:
    """The 50 public station names (deterministic, distinct), most popular first."""
    rng = np.random.default_rng(SEED)
    names: List[str] = []
    while len(names) < NUM_STATIONS:
        name = f'{_STREETS[rng.integers(len(_STREETS))]} St & {_CROSS[rng.integers(len(_CROSS))]}'
        if name not in names:
            names.append(name)
    return names


def load_stations(path: str = STATIONS_PATH) -> List[str]:
    with open(path, encoding='utf-8') as f:
        return [line.strip() for line in f if line.strip() and not line.startswith('#')]


def _hour_weights(profile: str, weekday: bool) -> np.ndarray:
    """Relative ride intensity per hour of day (0..23)."""
    hours = np.arange(24) + 0.5
    bump = lambda mu, sd: np.exp(-0.5 * ((hours - mu) / sd) ** 2)  # noqa: E731
    if profile == 'morning':
        w = bump(8.0, 1.0) + 0.05 * bump(10.5, 1.5)
    elif profile == 'evening':
        w = bump(17.5, 1.2) + 0.1 * bump(20.0, 1.5)
    else:  # leisure: midday and early evening, more on the weekend
        w = bump(13.5, 2.5) + 0.6 * bump(19.0, 1.5) + 0.05
        if not weekday:
            w = w + 0.4 * bump(11.0, 1.5)
    w = w + 0.01   # a little night traffic everywhere
    return w / w.sum()


def _time_in_hour(rng, day: int, hours: np.ndarray) -> np.ndarray:
    base = int(SAMPLE_START.timestamp()) * _MICROS + day * 86_400 * _MICROS
    offsets = rng.integers(0, 3600 * _MICROS, size=len(hours))
    return base + hours.astype(np.int64) * 3600 * _MICROS + offsets


def generate(seed: int = SEED) -> List[RideEvent]:
    """The sample rides, sorted by event time (deterministic for a seed)."""
    rng = np.random.default_rng(seed)
    names = stations()
    active = NUM_STATIONS - NUM_IDLE
    popularity = 1.0 / np.arange(1, active + 1) ** 1.1          # Zipf-like, most popular first
    popularity /= popularity.sum()
    # Work places concentrate downtown: a different (sharper) ranking over a shuffled order.
    work_order = rng.permutation(active)
    work_pop = np.empty(active)
    work_pop[work_order] = 1.0 / np.arange(1, active + 1) ** 1.4
    work_pop /= work_pop.sum()

    rides: List[Tuple[str, str, int]] = []   # (rider, station index or -1 for pop-up, micros)

    def add(rider: str, stations_idx: np.ndarray, micros: np.ndarray):
        rides.extend(zip([rider] * len(micros), stations_idx.tolist(), micros.tolist()))

    rider_no = 0
    for _ in range(NUM_COMMUTERS):
        rider = f'r{rider_no:06d}'
        rider_no += 1
        home = rng.choice(active, p=popularity)
        work = rng.choice(active, p=work_pop)
        for day in range(SAMPLE_DAYS):
            weekday = (SAMPLE_START + datetime.timedelta(days=day)).weekday() < 5
            p_ride = 0.75 if weekday else 0.08
            for profile, station in (('morning', home), ('evening', work)):
                if rng.random() < p_ride:
                    hour = rng.choice(24, size=1, p=_hour_weights(profile, weekday))
                    add(rider, np.array([station]), _time_in_hour(rng, day, hour))
    for _ in range(NUM_LEISURE):
        rider = f'r{rider_no:06d}'
        rider_no += 1
        home = rng.choice(active, p=popularity)
        for day in range(SAMPLE_DAYS):
            weekday = (SAMPLE_START + datetime.timedelta(days=day)).weekday() < 5
            n = rng.poisson(0.5 if weekday else 1.0)
            if n == 0:
                continue
            hours = rng.choice(24, size=n, p=_hour_weights('leisure', weekday))
            from_home = rng.random(n) < 0.7
            elsewhere = rng.choice(active, size=n, p=popularity)
            add(rider, np.where(from_home, home, elsewhere), _time_in_hour(rng, day, hours))
    for _ in range(NUM_COURIERS):
        rider = f'r{rider_no:06d}'
        rider_no += 1
        for day in range(SAMPLE_DAYS):
            n = rng.integers(8, 20)
            hours = rng.choice(24, size=n, p=_hour_weights('leisure', True))
            add(rider, rng.choice(active, size=n, p=popularity), _time_in_hour(rng, day, hours))
    # A non-public pop-up station at a Sunday festival.
    for _ in range(40):
        rider = f'r{rider_no:06d}'
        rider_no += 1
        add(rider, np.array([-1]), _time_in_hour(rng, 0, rng.integers(14, 20, size=1)))

    order = sorted(range(len(rides)), key=lambda i: (rides[i][2], rides[i][0]))
    durations = np.round(rng.lognormal(np.log(780.0), 0.55, size=len(rides)), 1)
    events = []
    for n, i in enumerate(order):
        rider, station, micros = rides[i]
        name = POP_UP_STATION if station < 0 else names[station]
        events.append(RideEvent(rider, name, int(micros), float(durations[n])))
    # A few malformed records, spread through the stream (dead-lettered by the job).
    for n, position in enumerate(np.linspace(100, len(events) - 100, 6).astype(int).tolist()):
        good = events[position]
        bad = (good._replace(rider_id=''), good._replace(duration_seconds=-12.0),
               good._replace(duration_seconds=float('nan')), good._replace(station='  '),
               good._replace(rider_id='   '), good._replace(duration_seconds=float('inf')))[n]
        events.insert(position, bad)
    return events


def write(events: List[RideEvent], path: str = RIDES_PATH) -> None:
    """Writes an Avro container file deterministically (fixed sync marker, deflate)."""
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    with open(path, 'wb') as f:
        fastavro.writer(f, EVENT_SCHEMA, (event_to_avro(e) for e in events), codec='deflate',
                        sync_marker=b'beam_dp.rides.v1', metadata={'generator': __name__})


def write_stations(path: str = STATIONS_PATH) -> None:
    with open(path, 'w', encoding='utf-8') as f:
        f.write('# Public station list of the continual_counts sample data (one key per line).\n')
        for name in stations():
            f.write(name + '\n')


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--output', default=RIDES_PATH, help='Avro file to write.')
    parser.add_argument('--stations_output', default=STATIONS_PATH)
    parser.add_argument('--seed', type=int, default=SEED)
    args = parser.parse_args(argv)
    events = generate(args.seed)
    write(events, args.output)
    write_stations(args.stations_output)
    print(f'wrote {len(events)} events to {args.output} '
          f'({os.path.getsize(args.output) / 1e6:.2f} MB) and {NUM_STATIONS} stations to '
          f'{args.stations_output}')


if __name__ == '__main__':
    main()
