-- report_explorer: every device x lever x workload as one point with its absolute metrics (the report's explorer)
--
-- Grain: one row per device x lever x workload of the latest serving run (the v_matrix view pivoted),
-- the baseline included as lever 'baseline'.
--
-- Key: device, lever, workload
--
-- Parameters:
--   $device = null      only this device; null = all
--
-- Columns:
--   device              accelerator, catalogue name
--   lever               lever name (baseline = the baseline configuration)
--   workload            workload name
--   goodput             goodput per GPU at capacity (matrix unit)
--   cost_per_mtok       USD per million output tokens at capacity (illustrative prices)
--   energy_per_token    J per output token at capacity
--   ttft_p99            time to first token, 99th percentile, at the reference load (matrix unit)
--   tpot_p99            time per output token, 99th percentile, at the reference load (matrix unit)
--   itl_p99             inter-token latency, 99th percentile, at the reference load (matrix unit)

with cells as (
    select *
    from v_matrix
    where ($device is null or device = $device)
),

points as (
    select device, lever, workload, metric, lever_value as value from cells
    union all
    select device, 'baseline' as lever, workload, metric, any_value(baseline_value) as value
    from cells
    group by device, workload, metric
),

final as (
    select
        device,
        lever,
        workload,
        max(value) filter (where metric = 'goodput') as goodput,
        max(value) filter (where metric = 'cost_per_mtok') as cost_per_mtok,
        max(value) filter (where metric = 'energy_per_token') as energy_per_token,
        max(value) filter (where metric = 'ttft_p99') as ttft_p99,
        max(value) filter (where metric = 'tpot_p99') as tpot_p99,
        max(value) filter (where metric = 'itl_p99') as itl_p99
    from points
    group by device, lever, workload
)

select * from final
order by device, lever, workload
