"""IoT sensors: sliding-window temperature statistics with late readings.

Generated sensor readings -> per-sensor sliding windows (1 minute, every 20 s) with the average,
maximum and minimum temperature -> the windowed sink. A pane fires ON_TIME when the watermark
passes a window's end; readings up to 30 s behind the watermark still update their windows in
LATE panes (accumulating); readings later than that are dropped to the late-data Delta table,
whose rows carry a ``reason`` — printed here counted by reason. The first micro-batch runs
before any watermark exists, so the hours-late readings in it are still accepted (their windows
are the lone ones hours before the rest).

The built-in generator stands in for the sensors: its ``user_id`` column is the sensor and
``amount`` the reading (the aggregate aliases name the pane columns ``avg_temperature`` ...).

Every windowing setting comes from ``conf/iot_sensors.conf`` (``spark.windowed.*``)::

    spark-submit --properties-file conf/iot_sensors.conf examples/iot_sensors.py
    python examples/iot_sensors.py [--output DIR] [--conf spark.windowed.totalEvents=800 ...]

Outputs go to ``./out/iot_sensors/`` (emptied first).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Sequence

import _common

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

NAME = "iot_sensors"

#: The hottest sensor of each window (the top-keys-per-window query, keeping rank 1), latest
#: windows first.
HOTTEST_SENSOR_SQL = """\
SELECT window_start, window_end, sensor, max_temperature, avg_temperature, readings
FROM (
  SELECT window_start, window_end, user_id AS sensor, round(max_temperature, 1) AS max_temperature,
         round(avg_temperature, 1) AS avg_temperature, readings,
         ROW_NUMBER() OVER (PARTITION BY window_start, window_end
                            ORDER BY max_temperature DESC, user_id) AS rank
  FROM sensors
)
WHERE rank = 1
ORDER BY window_start DESC
LIMIT 9"""

#: Windows that late readings changed after they were first reported.
LATE_UPDATES_SQL = """\
SELECT user_id AS sensor, window_start, window_end,
       count(*) AS panes, max(pane_index) AS last_pane, min(readings) AS readings_on_time,
       max(readings) AS readings_final
FROM sensors_triggers
GROUP BY user_id, window_start, window_end
HAVING max(pane_index) > 0
ORDER BY window_start, sensor
LIMIT 10"""


def main(argv: Sequence[str] | None = None, *, spark: "SparkSession | None" = None) -> _common.Outputs:
    """Run the example; return where its outputs are. ``spark``: use this session (tests)."""
    args = _common.Args.parse(NAME, __doc__, argv)
    out = _common.Outputs.fresh(args.output)
    with _common.windowed_session(args, spark) as session:
        _common.print_banner("IoT sensors", session, args)
        panes = (session.readStream.format("windowed")          # the rest: spark.windowed.*
                 .option("stateLocation", out.state)
                 .option("lateDataPath", out.late)
                 .load())
        seconds = _common.run_to_end(panes, out, query_name="sensors", spark=session)

        _common.create_views(session, out, "sensors")
        _common.show_sql(session, "Panes by kind and timing",
                         _common.PANE_COUNTS_SQL.format(name="sensors"))
        _common.show_sql(session, "Hottest sensor per window, latest first (current table)",
                         HOTTEST_SENSOR_SQL)
        _common.show_sql(session, "Windows updated by late readings (LATE panes)", LATE_UPDATES_SQL)
        _common.show_late_data(session, out, "sensors_late", event_id="event_id")
        _common.plot_timeline(out, title="IoT sensors: sliding windows in a 3-minute slice",
                              max_keys=3, minutes=3)
    _common.print_outputs("IoT sensors", out, seconds)
    return out


if __name__ == "__main__":
    main()
    sys.exit(0)
