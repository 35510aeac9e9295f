-- report_regime: which roofline regime bounds each pass over batch x context (report chart 2, left)
--
-- Grain: one row per device x context x batch of one decode run (first model and draft of the run,
-- smallest gamma, the i.i.d. alpha closest to 0.7, else the first other model).
--
-- Key: device, model, draft, context, batch
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

with run as (
    select run_id from decode_runs($run_id) order by n_cells desc, ended_at desc limit 1
),

points as (
    select d.*
    from decode_points((select run_id from run)) as d
),

pick as (
    select
        (select min(model) from points) as model,
        (select min(draft) from points where draft <> 'none') as draft,
        (select min(gamma) from points where draft <> 'none') as gamma,
        h.*
    from headline_acceptance((select run_id from run)) as h
),

final as (
    select
        p.device, p.model, p.draft, p.context, p.batch,
        any_value(p.plain_bound) as plain_bound,
        any_value(p.verify_bound) as verify_bound,
        any_value(p.speedup)::double as speedup,
        bool_and(p.fits_in_memory) as fits_in_memory
    from points as p
    join pick as k
        on p.model = k.model and p.draft = k.draft and p.gamma = k.gamma and abs(p.alpha - k.alpha) < 1e-9
        and acceptance_label(p.acceptance) = k.acceptance and p.decay is not distinct from k.decay
    group by p.device, p.model, p.draft, p.context, p.batch
)

select * from final
order by device, context, batch
