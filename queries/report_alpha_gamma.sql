-- report_alpha_gamma: speed-up over acceptance alpha x draft length gamma at one decode point (report chart 2, right)
--
-- Grain: one row per gamma of the run x alpha in 0, 0.05, ..., 0.95, 0.99 at one device x batch x context.
-- Times come from the run (the verify and draft passes do not depend on alpha); alpha enters through the
-- closed form E = (1 - alpha^(gamma+1)) / (1 - alpha), so any alpha is exact, not only the swept ones.
--
-- Key: device, model, draft, batch, context, gamma, alpha
--
-- Parameters:
--   $run_id = latest    decode run; latest = the newest committed decode run with the most gammas
--   $device = null      device; null = the run's first (alphabetical)
--   $batch = null       batch; null = the run's smallest
--   $context = null     context per row; null = the run's smallest
--
-- Columns:
--   device              accelerator, catalogue name
--   model               target model
--   draft               the draft
--   batch               rows decoded together
--   context             tokens cached per row
--   gamma               drafted tokens per verify pass
--   alpha               acceptance per drafted token
--   tokens_per_pass     E, expected tokens per verify pass
--   speedup             x, s_per_token_plain / ((t_verify_pass_s + t_draft_s) / (batch x E))

with run as (
    select run_id from decode_runs($run_id) where n_gamma > 0 order by n_gamma desc, ended_at desc limit 1
),

points as (
    from drafted_points((select run_id from run))
),

pick as (
    select
        coalesce($device, min(device)) as device,
        coalesce($batch, min(batch)) as batch,
        coalesce($context, min(context)) as context
    from points
),

per_gamma as (
    select
        p.device, p.model, p.draft, p.batch, p.context, p.gamma,
        any_value(p.t_plain_pass_s) as t_plain_pass_s,
        any_value(p.t_verify_pass_s) as t_verify_pass_s,
        any_value(p.t_draft_s) as t_draft_s
    from points as p
    join pick as k on p.device = k.device and p.batch = k.batch and p.context = k.context
    where p.model = (select min(model) from points) and p.draft = (select min(draft) from points)
    group by p.device, p.model, p.draft, p.batch, p.context, p.gamma
),

alphas as (
    select round(a * 0.05, 2) as alpha from range(0, 20) as t(a)
    union all
    select 0.99
),

final as (
    select
        g.device, g.model, g.draft, g.batch, g.context, g.gamma, a.alpha,
        (1 - pow(a.alpha, g.gamma + 1)) / (1 - a.alpha) as tokens_per_pass,
        (g.t_plain_pass_s / g.batch)
            / ((g.t_verify_pass_s + g.t_draft_s) / (g.batch * (1 - pow(a.alpha, g.gamma + 1)) / (1 - a.alpha)))
            as speedup
    from per_gamma as g
    cross join alphas as a
)

select * from final
order by gamma, alpha
