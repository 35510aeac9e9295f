-- validation_pairs: measured lever pairs of a validation run, the measured change against the predicted one
--
-- Grain: one row per pair id x metric x latency statistic of one validation run that has exactly one
-- ':with' and one ':without' row (a shared baseline row names several pair ids, separated by ';').
-- measured change = with / without - 1; predicted change = the same ratio of the modelled values, only
-- where the pair is expressed (pair_status of the :with row: every part of the lever is one the model
-- prices and both sides are priced the same way; sweepkit/validation/levers.py). The signs are compared
-- only where the measured change is beyond +-$band_pct % (smaller changes are within run-to-run noise)
-- and the pair is expressed; a predicted change of exactly 0 never agrees.
--
-- Key: pair_id, metric, statistic
--
-- Parameters:
--   $run_id = latest    validation run to read; latest = the newest committed validation run
--   $band_pct = 5.0     %, measured changes within +-this do not count toward sign agreement
--
-- Columns:
--   pair_id               the pair's id (pair_id column of the measurement file)
--   lever                 the lever, without its :with / :without suffix
--   lever_family          what the pair changes (framework, layout, kv format, scheduler, ...; joined by +)
--   pair_status           expressed, or not expressed: which part the model cannot price and why
--   source                where the with side was published
--   metric                the measured metric (docs/validation.md)
--   statistic             mean | 50 | 90 | 99 (null for throughputs)
--   unit                  unit of the four values
--   measured_without      the measured value without the lever
--   measured_with         the measured value with the lever
--   modelled_without      the modelled value without the lever (null when not modelled)
--   modelled_with         the modelled value with the lever (null when not modelled)
--   measured_change_pct   %, 100 x (measured_with / measured_without - 1)
--   predicted_change_pct  %, 100 x (modelled_with / modelled_without - 1); null when not expressed
--   size_error_pct        percentage points, predicted_change_pct - measured_change_pct; null when not expressed
--   sign_agrees           whether the changes have the same sign; null when not counted (see Grain)

with run as (
    from latest_run('validation', $run_id)
),

exploded as (
    select
        v.*,
        trim(unnest(string_split(v.pair_id, ';'))) as pid
    from validation as v
    semi join run using (run_id)
    where coalesce(v.pair_id, '') <> ''
      and (v.lever like '%:with' or v.lever like '%:without')
),

sides as (
    select
        pid as pair_id,
        regexp_replace(lever, ':(with|without)$', '') as lever,
        case when lever like '%:without' then 'without' else 'with' end as side,
        source,
        metric,
        case when metric in ('ttft', 'tpot', 'itl', 'e2e_latency') then coalesce(percentile, '') else '' end
            as statistic,
        unit,
        measured,
        modelled,
        coalesce(lever_family, '') as lever_family,
        coalesce(pair_status, '') as pair_status
    from exploded
    where pid <> ''
),

counted as (
    select
        pair_id,
        metric,
        statistic,
        count(*) filter (where side = 'with') as n_with,
        count(*) filter (where side = 'without') as n_without
    from sides
    group by all
),

paired as (
    select
        w.pair_id,
        w.lever,
        w.source,
        w.metric,
        w.statistic,
        w.unit,
        w.lever_family,
        w.pair_status,
        wo.measured as measured_without,
        w.measured as measured_with,
        wo.modelled as modelled_without,
        w.modelled as modelled_with,
        w.pair_status = 'expressed' and w.modelled is not null and wo.modelled is not null as expressed
    from sides as w
    join sides as wo using (pair_id, metric, statistic)
    join counted as c using (pair_id, metric, statistic)
    where w.side = 'with' and wo.side = 'without' and c.n_with = 1 and c.n_without = 1
),

final as (
    select
        pair_id,
        lever,
        nullif(lever_family, '') as lever_family,
        nullif(pair_status, '') as pair_status,
        source,
        metric,
        nullif(statistic, '') as statistic,
        unit,
        measured_without,
        measured_with,
        modelled_without,
        modelled_with,
        100.0 * (measured_with / measured_without - 1.0) as measured_change_pct,
        case when expressed then 100.0 * (modelled_with / modelled_without - 1.0) end as predicted_change_pct,
        case when expressed
            then 100.0 * (modelled_with / modelled_without - measured_with / measured_without) end
            as size_error_pct,
        case
            when not expressed then null
            when abs(100.0 * (measured_with / measured_without - 1.0)) <= $band_pct then null
            else sign(measured_with - measured_without) = sign(modelled_with - modelled_without)
                 and modelled_with <> modelled_without
        end as sign_agrees
    from paired
)

select * from final
order by pair_id, metric, statistic
