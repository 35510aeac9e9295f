-- report_validation_worst: the modelled points of the newest validation run furthest from measurement
--
-- Grain: one row per modelled point, the $limit largest |error_pct| of one validation run.
--
-- Key: source, file_row
--
-- Parameters:
--   $run_id = latest    validation run; latest = the newest committed validation run
--   $limit = 15         rows shown
--
-- Columns:
--   source              where the measurement was published
--   file_row            data row of its measurement file
--   setup               short description of the measured setup
--   metric              the measured metric
--   unit                unit of measured and modelled
--   measured            the measured value, in unit
--   modelled            the modelled value, in unit
--   error_pct           %, 100 x (modelled / measured - 1)

with run as (
    from latest_run('validation', $run_id)
),

final as (
    select
        v.source,
        v.file_row,
        v.setup,
        v.metric,
        v.unit,
        round(v.measured, 4) as measured,
        round(v.modelled, 4) as modelled,
        round(v.error_pct, 1) as error_pct
    from validation as v
    semi join run using (run_id)
    where v.status = 'modelled' and v.error_pct is not null
    order by abs(v.error_pct) desc
    limit $limit
)

select * from final
