-- report_validation_slices: error of the newest validation run by slice (report table)
--
-- Grain: one row per device x model class x weight format x framework x metric with modelled points.
--
-- Key: device, model_class, weight_format, framework, metric
--
-- Parameters:
--   $run_id = latest    validation run; latest = the newest committed validation run
--
-- Columns:
--   device              accelerator, catalogue name
--   model_class         dense | moe
--   weight_format       weight storage format
--   framework           the framework's first word (TensorRT-LLM, vLLM, SGLang, ...)
--   metric              the measured metric
--   points              modelled points in the slice
--   test_points         of which in the test split (not fitted on)
--   median_abs_error_pct  %, median of |error_pct|
--   bias_pct            %, median of error_pct (> 0: modelled above measured)
--   worst_error_pct     %, the error of largest magnitude in the slice

with run as (
    from latest_run('validation', $run_id)
),

modelled as (
    select
        v.device,
        coalesce(v.model_class, '') as model_class,
        v.weight_format,
        split_part(v.framework, ' ', 1) as framework,
        v.metric,
        v.split,
        v.error_pct
    from validation as v
    semi join run using (run_id)
    where v.status = 'modelled' and v.error_pct is not null
),

final as (
    select
        device,
        model_class,
        weight_format,
        framework,
        metric,
        count(*) as points,
        count(*) filter (where split = 'test') as test_points,
        round(median(abs(error_pct)), 1) as median_abs_error_pct,
        round(median(error_pct), 1) as bias_pct,
        round(arg_max(error_pct, abs(error_pct)), 1) as worst_error_pct
    from modelled
    group by all
)

select * from final
order by median_abs_error_pct desc, points desc
