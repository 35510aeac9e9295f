-- leviathan_table1: Leviathan et al. 2023 Table 1 (c = c_hat = 0 closed forms) beside the hardware speed-up
--
-- Grain: one row per alpha x gamma x device x model x draft x tp x batch x context of one decode run of
-- grids/leviathan.toml. Table 1 assumes a free draft (c = c_hat = 0): speed = E and operations =
-- (gamma + 1) / E, with E = tokens_per_pass = (1 - alpha^(gamma+1)) / (1 - alpha). The seed cost model
-- always charges the draft (c > 0) and the verify pass, so it cannot reproduce c = 0; the closed forms are
-- computed here from tokens_per_pass and the cost model's own speed-up is shown beside them.
--
-- Key: alpha, gamma, device, model, draft, tp, batch, context
--
-- Parameters:
--   $run_id = latest           decode run to read; latest = the newest committed decode run of grid $grid
--   $grid = leviathan          the grid name latest looks for
--   $paper_rows_only = true    true: only Table 1's six (alpha, gamma) rows
--
-- Columns:
--   alpha               acceptance per drafted token
--   gamma               draft tokens per verify pass
--   speed_c0            x, Thm 3.8 with c = 0: E = tokens_per_pass, 4 decimals
--   operations_c0       x, Thm 3.11 with c_hat = 0: (gamma + 1) / E, 4 decimals
--   paper_speed         x, Table 1's printed speed (null off its six rows)
--   paper_operations    x, Table 1's printed operations (null off its six rows)
--   device              accelerator of the measured columns
--   model               target model
--   draft               the draft (mtp in grids/leviathan.toml)
--   tp                  tensor-parallel degree
--   batch               rows decoded together
--   context             tokens cached per row
--   c_measured          c, one draft pass over one plain target pass on this hardware, 4 decimals
--   speed_thm38         x, Thm 3.8 with the measured c: E / (gamma c + 1), 4 decimals
--   speedup_measured    x, the cost model's speed-up s_per_token_plain / s_per_token_spec, 4 decimals

with run as (
    select run_id
    from runs
    where kind = 'decode'
      and (($run_id = 'latest' and grid_name = $grid) or run_id = $run_id)
    order by ended_at desc
    limit 1
),

paper as (
    -- Leviathan, Kalman, Matias, ICML 2023 (arXiv 2211.17192 v2), Table 1, sec. 3.5
    select alpha::double as alpha, gamma::integer as gamma, paper_operations::double as paper_operations,
           paper_speed::double as paper_speed
    from (values (0.6, 2, 1.53, 1.96), (0.7, 3, 1.58, 2.53), (0.8, 2, 1.23, 2.44),
                 (0.8, 5, 1.63, 3.69), (0.9, 2, 1.11, 2.71), (0.9, 10, 1.60, 6.86))
         as t(alpha, gamma, paper_operations, paper_speed)
),

points as (
    select d.*
    from decode as d
    semi join run using (run_id)
    where d.draft <> 'none' and coalesce(d.acceptance, 'iid') = 'iid'        -- Table 1 is i.i.d. alpha
),

final as (
    select
        p.alpha,
        p.gamma,
        round(p.tokens_per_pass::double, 4) as speed_c0,
        round((p.gamma + 1) / p.tokens_per_pass::double, 4) as operations_c0,
        t.paper_speed,
        t.paper_operations,
        p.device, p.model, p.draft, p.tp, p.batch, p.context,
        round(p.draft_cost_ratio::double, 4) as c_measured,
        round(p.tokens_per_pass::double / (p.gamma * p.draft_cost_ratio::double + 1), 4) as speed_thm38,
        round(p.speedup::double, 4) as speedup_measured
    from points as p
    left join paper as t
        on round(p.alpha, 6) = round(t.alpha, 6) and p.gamma = t.gamma
    where not $paper_rows_only or t.paper_speed is not null
)

select * from final
order by alpha, gamma, device, model, draft, tp, batch, context
