-- explorer: any two metrics for every device x lever x workload of a serving run (scatter / Pareto views)
--
-- Grain: one row per device x lever x workload of one serving run.
--
-- Key: device, lever, workload
--
-- Parameters:
--   $run_id = latest       serving run to read; latest = the newest committed serving run
--   $x = goodput           first metric (see below)
--   $y = cost_per_mtok     second metric: goodput, capacity, tokens_per_gpu, cost_per_mtok, energy_per_token,
--                          ttft_p50, ttft_p90, ttft_p99, tpot_p50, tpot_p90, tpot_p99, itl_p50, itl_p90, itl_p99
--
-- Columns:
--   device      accelerator, catalogue name
--   lever       lever name
--   workload    workload name
--   x_metric    the first metric's name
--   x_value     its value (goodput req/s per GPU; capacity sessions or req/s; tokens/s per GPU; USD per M
--               tokens; J per token; latencies in s at the reference load)
--   y_metric    the second metric's name
--   y_value     its value

with long as (
    select device, lever, workload, metric, value
    from capacity_long($run_id)
),

checked as (
    select case when $x not in (select metric from metric_catalogue()) or $y not in (select metric from metric_catalogue())
                then error('x/y must be one of ' || (select string_agg(metric, ', ' order by ord) from metric_catalogue()))
                else true end as ok
),

final as (
    select x.device, x.lever, x.workload, $x as x_metric, x.value as x_value, $y as y_metric, y.value as y_value
    from long x
    join long y on y.device = x.device and y.lever = x.lever and y.workload = x.workload and y.metric = $y
    cross join checked
    where x.metric = $x and checked.ok
)

select * from final
order by workload, device, lever
