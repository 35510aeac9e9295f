-- pareto: which (device, lever) points of a workload no other point beats on every metric of a front
--
-- Grain: one row per workload x device x lever x front of one serving run.
-- Key: workload, device, lever, front
-- A point is on a front when no other point of the same workload (any device, any lever) is at least as good
-- on every metric of the front and strictly better on one. Fronts: each of the 15 pairs of the six metrics
-- (goodput per GPU up; $/M tok, J/token, TTFT p99, TPOT p99, ITL p99 down) and 'all' (the six together).
-- Capacity metrics at capacity, latencies at the workload's reference load. Points with a null or zero-capacity
-- metric are left out of the fronts that use it.
--
-- Parameters:
--   $run_id = latest     serving run to read; latest = the newest committed serving run
--
-- Columns:
--   workload     workload name
--   device       accelerator, catalogue name
--   lever        lever name
--   front        'all', or two metric names in alphabetical order joined by ' x ' (e.g. 'cost_per_mtok x goodput')
--   on_front     true: no point of the workload dominates this one on the front's metrics
--   dominated_by points of the workload that dominate it (0 when on_front)

with long as (
    -- the matrix's six metrics as "lower is better" (goodput negated), one row per point x metric
    select workload, device, lever, metric, case when higher_is_better then -value else value end as score
    from capacity_long($run_id)
    where in_matrix and value is not null and isfinite(value) and goodput_per_gpu_per_s > 0
),

metrics as (
    select distinct metric from long
),

fronts as (
    select a.metric || ' x ' || b.metric as front, a.metric as metric from metrics a join metrics b on a.metric < b.metric
    union all
    select a.metric || ' x ' || b.metric, b.metric from metrics a join metrics b on a.metric < b.metric
    union all
    select 'all', metric from metrics
),

points as (
    select f.front, l.workload, l.device, l.lever, l.metric, l.score
    from long l
    join fronts f using (metric)
),

-- points with every metric of the front
complete as (
    select front, workload, device, lever
    from points
    group by all
    having count(*) = (select count(*) from fronts f2 where f2.front = points.front)
),

scored as (
    select p.*
    from points p
    semi join complete c on c.front = p.front and c.workload = p.workload and c.device = p.device and c.lever = p.lever
),

comparisons as (
    select p.front, p.workload, p.device, p.lever, q.device as q_device, q.lever as q_lever,
           bool_and(q.score <= p.score) as no_worse, bool_or(q.score < p.score) as better
    from scored p
    join scored q on q.front = p.front and q.workload = p.workload and q.metric = p.metric
                 and (q.device <> p.device or q.lever <> p.lever)
    group by all
),

final as (
    select c.workload, c.device, c.lever, c.front,
           coalesce(sum(case when x.no_worse and x.better then 1 else 0 end), 0) = 0 as on_front,
           coalesce(sum(case when x.no_worse and x.better then 1 else 0 end), 0)::bigint as dominated_by
    from complete c
    left join comparisons x on x.front = c.front and x.workload = c.workload and x.device = c.device
                           and x.lever = c.lever
    group by all
    order by c.workload, c.front, c.device, c.lever
)

select * from final
