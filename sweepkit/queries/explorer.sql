-- explorer: any two metrics for every device x lever x workload of a serving run (scatter / Pareto views)
--
-- Grain: one row per device x lever x workload of one serving run.
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

with run as (
    select run_id
    from runs
    where kind = 'serving' and status = 'committed' and ($run_id = 'latest' or run_id = $run_id)
    order by ended_at desc
    limit 1
),

long as (
    select device, lever, workload, m.metric, m.value
    from capacity
    semi join run using (run_id),
    lateral (values
        ('goodput', goodput_per_gpu_per_s), ('capacity', capacity_per_s), ('tokens_per_gpu', tokens_per_gpu_per_s),
        ('cost_per_mtok', cost_per_mtok_usd), ('energy_per_token', energy_per_token_j),
        ('ttft_p50', ttft_p50_s_at_ref), ('ttft_p90', ttft_p90_s_at_ref), ('ttft_p99', ttft_p99_s_at_ref),
        ('tpot_p50', tpot_p50_s_at_ref), ('tpot_p90', tpot_p90_s_at_ref), ('tpot_p99', tpot_p99_s_at_ref),
        ('itl_p50', itl_p50_s_at_ref), ('itl_p90', itl_p90_s_at_ref), ('itl_p99', itl_p99_s_at_ref)
    ) as m(metric, value)
),

checked as (
    select case when $x not in ('goodput', 'capacity', 'tokens_per_gpu', 'cost_per_mtok', 'energy_per_token',
                                'ttft_p50', 'ttft_p90', 'ttft_p99', 'tpot_p50', 'tpot_p90', 'tpot_p99', 'itl_p50',
                                'itl_p90', 'itl_p99')
                  or $y not in ('goodput', 'capacity', 'tokens_per_gpu', 'cost_per_mtok', 'energy_per_token',
                                'ttft_p50', 'ttft_p90', 'ttft_p99', 'tpot_p50', 'tpot_p90', 'tpot_p99', 'itl_p50',
                                'itl_p90', 'itl_p99')
                then error('x/y must be one of goodput, capacity, tokens_per_gpu, cost_per_mtok, energy_per_token, '
                           || 'ttft_p50, ttft_p90, ttft_p99, tpot_p50, tpot_p90, tpot_p99, itl_p50, itl_p90, itl_p99')
                else true end as ok
)

select x.device, x.lever, x.workload, $x as x_metric, x.value as x_value, $y as y_metric, y.value as y_value
from long x
join long y on y.device = x.device and y.lever = x.lever and y.workload = x.workload and y.metric = $y
cross join checked
where x.metric = $x and checked.ok
order by x.workload, x.device, x.lever
