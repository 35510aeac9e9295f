-- report_validation: measured against modelled values of the newest validation run (report chart)
--
-- Grain: one row per modelled point of one validation run (sweepkit validate).
--
-- Key: source, setup, metric, measured
--
-- Parameters:
--   $run_id = latest    validation run; latest = the newest committed validation run
--
-- Columns:
--   source              where the measurement was published
--   setup               short description of the measured setup
--   metric              step_time | decode_tok_s | max_output_throughput | output_throughput | ttft | tpot | itl
--   unit                unit of measured and modelled
--   split               train | test (the rows sweepkit calibrate fits on are train)
--   measured            the measured value, in unit
--   modelled            the cost model's value at the measured point, in unit
--   error_pct           %, 100 x (modelled / measured - 1)
--   ratio               modelled / measured (1 on the y = x line)

with run as (
    from latest_run('validation', $run_id)
),

final as (
    select
        v.source,
        v.setup,
        v.metric,
        v.unit,
        v.split,
        v.measured,
        v.modelled,
        v.error_pct,
        v.modelled / v.measured as ratio
    from validation as v
    semi join run using (run_id)
    where v.status = 'modelled'
)

select * from final
order by source, metric, measured
