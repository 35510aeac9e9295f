-- report_speedup: speed-up of speculative decoding against batch, per device and context (report chart 1)
--
-- Grain: one row per device x model x draft x context x batch of one decode run, at one (gamma, alpha).
--
-- Key: device, model, draft, context, batch, gamma, alpha, acceptance
--
-- Parameters:
--   $run_id = latest    decode run; latest = the newest committed decode run with at least two batch sizes
--   $gamma = null       drafted tokens per verify pass; null = the run's smallest gamma
--   $alpha = null       acceptance per drafted token; null = the run's i.i.d. alpha closest to 0.7 (else its first model)
--
-- Columns:
--   device              accelerator, catalogue name
--   model               target model
--   draft               none, mtp or a draft model
--   context             tokens cached per row
--   batch               rows decoded together
--   gamma               drafted tokens per verify pass
--   alpha               acceptance per drafted token (assumed; alpha_1 of a per-position model)
--   acceptance          acceptance model: iid, decaying or a named table
--   ms_per_token_plain  ms per output token, plain = s_per_token_plain x 1e3
--   ms_per_token_spec   ms per output token, speculative = s_per_token_spec x 1e3
--   speedup             x, plain / speculative time per token (break-even at 1)
--   verify_bound        memory | compute | power: what limits the verify pass
--   fits_in_memory      the point's weights and KV fit in HBM
--   speedup_p10         x, p10 of the speed-up over the grid's [bands] draws; null without bands
--   speedup_p90         x, p90 of the same; null without bands

with run as (
    select run_id from decode_runs($run_id) order by (n_batch >= 2) desc, ended_at desc limit 1
),

points as (
    from drafted_points((select run_id from run))
),

pick as (
    select
        coalesce($gamma, (select min(gamma) from points)) as gamma,
        coalesce($alpha, h.alpha) as alpha,
        h.acceptance,
        h.decay
    from headline_acceptance((select run_id from run)) as h
),

final as (
    select
        p.device, p.model, p.draft, p.context, p.batch,
        p.gamma,
        p.alpha,
        acceptance_label(p.acceptance) as acceptance,
        p.s_per_token_plain * 1e3 as ms_per_token_plain,
        p.s_per_token_spec * 1e3 as ms_per_token_spec,
        p.speedup::double as speedup,
        p.verify_bound,
        p.fits_in_memory,
        p.speedup_p10::double as speedup_p10,
        p.speedup_p90::double as speedup_p90
    from points as p
    join pick as k on p.gamma = k.gamma and abs(p.alpha - k.alpha) < 1e-9
        and ($alpha is not null or (acceptance_label(p.acceptance) = k.acceptance and p.decay is not distinct from k.decay))
)

select * from final
order by device, model, draft, context, batch
