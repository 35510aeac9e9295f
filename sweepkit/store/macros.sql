-- sweepkit warehouse macros: the SQL every report shares, said once (applied with schema.sql).
--
-- Only committed runs have a runs row, so no macro filters on runs.status. The metric rows of the last two
-- macros come from the metric catalogue (sweepkit/catalogue/metrics.py, values_sql) when they are applied.

-- The newest run of one kind, or the run wanted names ('latest' = the newest).
create or replace macro latest_run(run_kind, wanted) as table
    select run_id
    from runs
    where kind = run_kind and (wanted = 'latest' or run_id = wanted)
    order by ended_at desc
    limit 1;

-- Every decode point of one decode run (the wanted run of latest_run).
create or replace macro decode_points(wanted) as table
    select d.*
    from decode as d
    semi join latest_run('decode', wanted) using (run_id);

-- Every pass of one trace run.
create or replace macro trace_run_steps(wanted) as table
    select t.*
    from trace_steps as t
    semi join latest_run('trace', wanted) using (run_id);

-- weight/kv/compute formats as one label, e.g. bf16/bf16/bf16.
create or replace macro formats_label(weight_format, kv_format, compute_format) as
    weight_format || '/' || kv_format || '/' || compute_format;

-- A decode point's acceptance model: iid when no named table or decay was given.
create or replace macro acceptance_label(acceptance) as coalesce(acceptance, 'iid');

-- r of a decaying model; 1 for iid (a named table keeps its own, null).
create or replace macro decay_value(acceptance, decay) as case when acceptance is null then 1.0 else decay end;

-- How far a point is from the headline scenario (iid acceptance, alpha 0.7): smaller is closer.
create or replace macro headline_distance(acceptance, alpha) as
    case when coalesce(acceptance, 'iid') = 'iid' then 0 else 2 end + abs(alpha - 0.7);

-- The metric catalogue as a table: name, unit, better direction, where it is read, matrix order.
create or replace macro metric_catalogue() as table
    select metric, unit, higher_is_better, capacity_metric, in_matrix, ord
    from (select 1 as goodput_per_gpu_per_s, 1 as capacity_per_s, 1 as tokens_per_gpu_per_s,
                 1 as cost_per_mtok_usd, 1 as energy_per_token_j, 1 as ttft_p50_s_at_ref, 1 as ttft_p90_s_at_ref,
                 1 as ttft_p99_s_at_ref, 1 as tpot_p50_s_at_ref, 1 as tpot_p90_s_at_ref, 1 as tpot_p99_s_at_ref,
                 1 as itl_p50_s_at_ref, 1 as itl_p90_s_at_ref, 1 as itl_p99_s_at_ref) as c,
    lateral (values
{metrics}
    ) as m(metric, unit, value, higher_is_better, capacity_metric, in_matrix, ord);

-- One serving run's capacity table in long format: one row per device x lever x workload x metric.
create or replace macro capacity_long(wanted) as table
    select c.device, c.lever, c.workload, c.draft, c.saturated, c.capacity_per_s, c.goodput_per_gpu_per_s,
           m.metric, m.unit, m.value, m.higher_is_better, m.capacity_metric, m.in_matrix, m.ord
    from capacity as c
    semi join latest_run('serving', wanted) using (run_id),
    lateral (values
{metrics}
    ) as m(metric, unit, value, higher_is_better, capacity_metric, in_matrix, ord);

-- The draws of one serving run's [serving.bands] in long format: capacity_long's rows, one per draw.
create or replace macro draws_long(wanted) as table
    select c.device, c.lever, c.workload, c.draw, m.metric, m.value, m.higher_is_better, m.in_matrix
    from serving_draws as c
    semi join latest_run('serving', wanted) using (run_id),
    lateral (values
{metrics}
    ) as m(metric, unit, value, higher_is_better, capacity_metric, in_matrix, ord);

-- A lever's verdict from its change over the baseline: same within +-same_pct %, else better or worse.
create or replace macro verdict_of(change_pct, higher_is_better, same_pct) as
    case when change_pct is null then null
         when abs(change_pct) <= same_pct then 'same'
         when (change_pct > 0) = higher_is_better then 'better'
         else 'worse' end;

-- Every decode run (or the one wanted) with what the report charts choose a run by: distinct drafted
-- gammas, batch x context cells and batches.
create or replace macro decode_runs(wanted) as table
    select r.run_id, r.ended_at,
           count(distinct d.gamma) filter (where d.draft <> 'none') as n_gamma,
           count(distinct (d.batch, d.context)) as n_cells,
           count(distinct d.batch) as n_batch
    from runs as r
    join decode as d using (run_id)
    where r.kind = 'decode' and (wanted = 'latest' or r.run_id = wanted)
    group by r.run_id, r.ended_at;

-- The acceptance scenario closest to the headline one (iid, alpha 0.7) among the drafted points of a run.
create or replace macro headline_acceptance(wanted) as table
    select arg_min(alpha, headline_distance(acceptance, alpha)) as alpha,
           arg_min(acceptance_label(acceptance), headline_distance(acceptance, alpha)) as acceptance,
           arg_min(decay, headline_distance(acceptance, alpha)) as decay
    from decode_points(wanted)
    where draft <> 'none';

-- decode_points with formats, acceptance and decay as the reports print them.
create or replace macro labelled_points(wanted) as table
    select * replace (acceptance_label(acceptance) as acceptance, decay_value(acceptance, decay) as decay),
           formats_label(weight_format, kv_format, compute_format) as formats
    from decode_points(wanted);

-- decode_points of the drafted points only (draft <> none).
create or replace macro drafted_points(wanted) as table
    select * from decode_points(wanted) where draft <> 'none';
