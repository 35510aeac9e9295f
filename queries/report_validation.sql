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
--   device              accelerator, catalogue name
--   weight_format       weight storage format
--   model_class         dense | moe
--   framework           the framework's first word (TensorRT-LLM, vLLM, SGLang, ...)
--   metric              step_time | decode_tok_s | max_output_throughput | output_throughput | total_throughput
--                       | ttft | tpot | itl | e2e_latency
--   unit                unit of measured and modelled
--   split               train | test | check (calibrate fits on train; check rows, independent checks, never)
--   measured            the measured value, in unit
--   modelled            the cost model's value at the measured point, in unit
--   measured_si         the measured value in s or tokens/s of the whole measured system
--   modelled_si         the modelled value in s or tokens/s of the whole measured system
--   error_pct           %, 100 x (modelled / measured - 1)
--   ratio               modelled / measured (1 on the y = x line)

with run as (
    from latest_run('validation', $run_id)
),

scaled as (
    select
        v.*,
        case v.unit when 'ms' then 1e-3 when 'us' then 1e-6 when 'tok/s/gpu' then v.gpus else 1.0 end as to_si
    from validation as v
    semi join run using (run_id)
    where v.status = 'modelled' and v.modelled is not null
),

final as (
    select
        source,
        setup,
        device,
        weight_format,
        coalesce(model_class, '') as model_class,
        split_part(framework, ' ', 1) as framework,
        metric,
        unit,
        split,
        measured,
        modelled,
        measured * to_si as measured_si,
        modelled * to_si as modelled_si,
        error_pct,
        modelled / measured as ratio
    from scaled
)

select * from final
order by source, metric, measured
