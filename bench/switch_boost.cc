// switch: the Boost.Context peers, built only when Boost.Context is found.
// C++ is confined to this file; the C side times best-of-N through the
// sb_run_fn callbacks below.
//
// Same shape as our own switch loops (and as /work/shared/bench's
// switch_bench.cc): a partner that only switches back, one round trip = two
// switches.
#include <boost/context/detail/fcontext.hpp>
#include <boost/context/fiber.hpp>

#include <utility>

#include "bench.h"

namespace ctx = boost::context;

// The partner fiber lives across runs; at exit its destructor unwinds the
// partner's loop (Boost's forced_unwind), so nothing leaks.
static ctx::fiber fiber_partner;

static ctx::fiber fiber_partner_loop(ctx::fiber &&main)
{
    for (;;)
        main = std::move(main).resume();
    return std::move(main);
}

extern "C" double sb_boost_fiber_run(long round_trips)
{
    if (!fiber_partner)
        fiber_partner = ctx::fiber{fiber_partner_loop};
    // A local keeps the handle in a register, as in the peer benchmark.
    ctx::fiber f = std::move(fiber_partner);
    double t0 = sb_now_ns();
    for (long i = 0; i < round_trips; i++)
        f = std::move(f).resume();
    double ns = sb_now_ns() - t0;
    fiber_partner = std::move(f);
    return ns;
}

// The raw jump underneath boost::context::fiber: the floor for any
// fcontext-style switch. Its partner stays suspended on a static stack.
alignas(64) static char fcontext_stack[64 * 1024];
static ctx::detail::fcontext_t fcontext_partner;

static void fcontext_partner_loop(ctx::detail::transfer_t t)
{
    for (;;)
        t = ctx::detail::jump_fcontext(t.fctx, nullptr);
}

extern "C" double sb_boost_fcontext_run(long round_trips)
{
    if (!fcontext_partner) {
        fcontext_partner = ctx::detail::make_fcontext(
            fcontext_stack + sizeof fcontext_stack, sizeof fcontext_stack,
            fcontext_partner_loop);
        fcontext_partner = ctx::detail::jump_fcontext(fcontext_partner, nullptr).fctx;
    }
    ctx::detail::fcontext_t to = fcontext_partner;
    double t0 = sb_now_ns();
    for (long i = 0; i < round_trips; i++)
        to = ctx::detail::jump_fcontext(to, nullptr).fctx;
    double ns = sb_now_ns() - t0;
    fcontext_partner = to;
    return ns;
}
