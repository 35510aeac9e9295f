-- report_trace: the mechanism trace as a timeline of passes, with each row's drafted, accepted and rejected tokens
--
-- Grain: one row per mode x step x request of one trace run (sweepkit trace).
--
-- Key: mode, request, pass_index
--
-- Parameters:
--   $run_id = latest    trace run; latest = the newest committed trace run
--
-- Columns:
--   mode                plain | speculative
--   request             request number, from 0
--   lane                timeline row label, mode and request
--   pass_index          step number within the mode, from 0
--   pass_kind           prefill | decode
--   start_ms            ms, step start (draft passes start here)
--   verify_start_ms     ms, draft passes end, the target pass starts
--   end_ms              ms, step end: the row's tokens arrive
--   drafted_tokens      tokens the draft proposed for the row
--   accepted_tokens     drafted tokens kept (after the output cap)
--   rejected_tokens     drafted tokens discarded = drafted - accepted
--   target_tokens       the target's own token: 1 (first, plain, correction or bonus), 0 when capped
--   emitted_tokens      tokens the row emitted = accepted + target
--   target_token        first | plain | correction | bonus | none
--   tokens_done         output tokens of the request after the step
--   bound               memory | compute | power: what limits the target pass

with steps as (
    from trace_run_steps($run_id)
),

final as (
    select
        mode,
        request,
        mode || ' · request ' || request as lane,
        pass_index,
        pass_kind,
        start_s * 1e3 as start_ms,
        verify_start_s * 1e3 as verify_start_ms,
        end_s * 1e3 as end_ms,
        drafted_tokens,
        emitted_tokens - (target_token <> 'none')::integer as accepted_tokens,
        drafted_tokens - (emitted_tokens - (target_token <> 'none')::integer) as rejected_tokens,
        (target_token <> 'none')::integer as target_tokens,
        emitted_tokens,
        target_token,
        tokens_done,
        bound
    from steps
)

select * from final
order by mode, request, pass_index
