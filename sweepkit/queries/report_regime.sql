-- report_regime: which roofline regime bounds each pass over batch x context (report chart 2, left)
--
-- Grain: one row per device x context x batch of one decode run (first model and draft of the run,
-- smallest gamma, the i.i.d. alpha closest to 0.7, else the first other model).
--
-- Parameters:
--   $run_id = latest    decode run; latest = the newest committed decode run with the most batch x context cells
--
-- Columns:
--   device              accelerator, catalogue name
--   model               target model
--   draft               the draft of the verify pass
--   context             tokens cached per row
--   batch               rows decoded together
--   plain_bound         memory | compute | power: what limits the plain decode pass
--   verify_bound        memory | compute | power: what limits the verify pass (gamma + 1 positions per row)
--   speedup             x, plain / speculative time per token
--   fits_in_memory      the point's weights and KV fit in HBM

with candidates as (
    select r.run_id, r.ended_at, count(distinct (d.batch, d.context)) as n_cells
    from runs as r
    join decode as d using (run_id)
    where r.kind = 'decode' and r.status = 'committed' and ($run_id = 'latest' or r.run_id = $run_id)
    group by r.run_id, r.ended_at
),

run as (
    select run_id from candidates order by n_cells desc, ended_at desc limit 1
),

points as (
    select d.*
    from decode as d
    semi join run using (run_id)
),

pick as (
    select
        min(model) as model,
        min(draft) filter (where draft <> 'none') as draft,
        min(gamma) filter (where draft <> 'none') as gamma,
        arg_min(alpha, (case when coalesce(acceptance, 'iid') = 'iid' then 0 else 2 end + abs(alpha - 0.7))) as alpha,
        arg_min(coalesce(acceptance, 'iid'), (case when coalesce(acceptance, 'iid') = 'iid' then 0 else 2 end + abs(alpha - 0.7))) as acceptance,
        arg_min(decay, (case when coalesce(acceptance, 'iid') = 'iid' then 0 else 2 end + abs(alpha - 0.7))) as decay
    from points
),

final as (
    select
        p.device,
        p.model,
        p.draft,
        p.context,
        p.batch,
        any_value(p.plain_bound) as plain_bound,
        any_value(p.verify_bound) as verify_bound,
        any_value(p.speedup)::double as speedup,
        bool_and(p.fits_in_memory) as fits_in_memory
    from points as p
    join pick as k
        on p.model = k.model and p.draft = k.draft and p.gamma = k.gamma and abs(p.alpha - k.alpha) < 1e-9
        and coalesce(p.acceptance, 'iid') = k.acceptance and p.decay is not distinct from k.decay
    group by p.device, p.model, p.draft, p.context, p.batch
)

select * from final
order by device, context, batch
