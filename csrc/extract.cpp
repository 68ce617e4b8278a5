// _core.extract: answer extraction from raw model output, compiled port of
// benchmint/metrics/extract_ref.py (its module docstring is the specification and
// the section names below follow it: J1-J3, L0-L4, C1-C4, H1-H4).
//
// The text is worked on as an array of code points, so every index below is a
// Python string index: pure-ASCII input is read in place (one byte = one code
// point), anything else is decoded from UTF-8 into a reusable buffer first.
// The only things left Undecided are JSON values this port does not reproduce
// exactly (integers beyond int64, float literals whose conversion is out of
// range, nesting deeper than kMaxDepth, huge integer literals) and input that
// is not valid UTF-8.
#include "extract.hpp"

#include <pybind11/pybind11.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstring>
#include <string>
#include <system_error>

namespace py = pybind11;

namespace bm {
namespace {

using u32 = uint32_t;
constexpr u32 kNoChar = 0xFFFFFFFFu;  // "no character here": matches no class

// ---------------------------------------------------------------------------
// character classes

inline bool is_letter(u32 c) { return ((c | 0x20u) - u32('a')) < 26u; }
inline bool is_upper(u32 c) { return c - u32('A') < 26u; }
inline bool is_digit(u32 c) { return c - u32('0') < 10u; }
inline bool is_hspace(u32 c) { return c == ' ' || c == '\t' || c == 0xA0 || c == 0x3000; }
inline bool is_space(u32 c) { return is_hspace(c) || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
inline bool is_break(u32 c) { return c == '\n' || c == '\r'; }
inline bool is_cjk(u32 c) { return c >= 0x4E00 && c <= 0x9FFF; }
inline u32 lower(u32 c) { return is_upper(c) ? c + 32u : c; }

template <size_t N>
inline bool in_set(u32 c, const char32_t (&set)[N]) {
    for (size_t x = 0; x + 1 < N; ++x)
        if (c == u32(set[x])) return true;
    return false;
}

// A string: code points p[0..n).  Out-of-range reads go through at().
template <class C>
struct Str {
    const C* p;
    int n;

    u32 operator[](int i) const { return u32(p[i]); }
    u32 at(int i) const { return (i >= 0 && i < n) ? u32(p[i]) : kNoChar; }
    u32 lo(int i) const { return lower(u32(p[i])); }
    Str sub(int a, int b) const { return Str{p + a, b - a}; }

    // startswith(w, i) on the text itself
    template <size_t N>
    bool has(int i, const char32_t (&w)[N]) const {
        constexpr int len = int(N) - 1;
        if (i < 0 || len > n - i) return false;
        for (int x = 0; x < len; ++x)
            if (u32(p[i + x]) != u32(w[x])) return false;
        return true;
    }
    // startswith(w, i) on LOWER(text); w is lowercase
    template <size_t N>
    bool lhas(int i, const char32_t (&w)[N]) const {
        constexpr int len = int(N) - 1;
        if (i < 0 || len > n - i) return false;
        for (int x = 0; x < len; ++x)
            if (lower(u32(p[i + x])) != u32(w[x])) return false;
        return true;
    }
};

// First index >= from holding c, or -1 (memchr on the ASCII path).
inline int find_char(const Str<unsigned char>& s, int from, u32 c) {
    if (from >= s.n) return -1;
    const void* hit = std::memchr(s.p + from, int(c), size_t(s.n - from));
    return hit ? int(static_cast<const unsigned char*>(hit) - s.p) : -1;
}
inline int find_char(const Str<char32_t>& s, int from, u32 c) {
    for (int i = from; i < s.n; ++i)
        if (u32(s.p[i]) == c) return i;
    return -1;
}

template <class C>
inline bool letter_at(const Str<C>& s, int i) {
    return is_letter(s.at(i));
}
template <class C>
inline bool digit_at(const Str<C>& s, int i) {
    return is_digit(s.at(i));
}
template <class C>
inline int skip_hspace(const Str<C>& s, int i) {
    while (i < s.n && is_hspace(s[i])) ++i;
    return i;
}
template <class C>
inline int skip_space(const Str<C>& s, int i) {
    while (i < s.n && is_space(s[i])) ++i;
    return i;
}
template <class C>
inline int word_end(const Str<C>& s, int i) {
    while (i < s.n && is_letter(s[i])) ++i;
    return i;
}
template <class C, size_t N>
inline bool word_is(const Str<C>& s, int a, int b, const char32_t (&w)[N]) {
    return b - a == int(N) - 1 && s.lhas(a, w);
}
template <class C>
inline int line_end(const Str<C>& s, int i, int n) {  // n: an upper bound <= s.n
    while (i < n && !is_break(s[i])) ++i;
    return i;
}
template <class C>
inline void strip_space(const Str<C>& s, int& a, int& b) {
    while (a < b && is_space(s[a])) ++a;
    while (b > a && is_space(s[b - 1])) --b;
}
template <class C>
inline bool blank(const Str<C>& s, int a, int b) {
    strip_space(s, a, b);
    return a == b;
}

template <class C>
bool letter_bounded(const Str<C>& s, int start, int end) {
    if (start < end) {
        if (is_letter(s[start]) && letter_at(s, start - 1)) return false;
        if (is_letter(s[end - 1]) && letter_at(s, end)) return false;
    }
    return true;
}

// STRIP-WRAPPERS
template <class C>
Str<C> strip_wrappers(const Str<C>& s) {
    int a = 0, b = s.n;
    strip_space(s, a, b);
    bool changed = true;
    while (changed && a < b) {
        changed = false;
        const u32 last = s[b - 1];
        if (last == '.' || last == 0x3002) {
            --b;
            strip_space(s, a, b);
            changed = true;
            continue;
        }
        const int len = b - a;
        int la = 0, lb = 0;
        if (len >= 4 && ((s.has(a, U"**") && s.has(b - 2, U"**")) || (s.has(a, U"__") && s.has(b - 2, U"__")))) {
            la = lb = 2;
        } else if (len >= 2) {
            const u32 f = s[a];
            if ((f == '`' || f == '$' || f == '"' || f == '\'') && last == f)
                la = lb = 1;
            else if (f == 0x201C && last == 0x201D)
                la = lb = 1;
        }
        if (la) {
            a += la;
            b -= lb;
            strip_space(s, a, b);
            changed = true;
        }
    }
    return s.sub(a, b);
}

constexpr int kSpanMax = 1000;         // SPAN_MAX
constexpr int kMaxHklCandidates = 64;  // MAX_HKL_CANDIDATES

// Index of the '}' matching the '{' at open (plain depth count), or -1 when
// there is none within SPAN_MAX characters of content.
template <class C>
int match_brace(const Str<C>& s, int open) {
    int depth = 0;
    const int stop = int(std::min<int64_t>(s.n, int64_t(open) + 2 + kSpanMax));
    for (int i = open; i < stop; ++i) {
        const u32 c = s[i];
        if (c == '{') {
            ++depth;
        } else if (c == '}') {
            if (--depth == 0) return i;
        }
    }
    return -1;
}

// ---------------------------------------------------------------------------
// scratch buffers (one set per thread, reused: no allocation once warm)

struct Cand {
    int pos, kind, close;
};
struct Span {
    int a, b, seq;
    bool bare;
};
struct Scratch {
    std::vector<char32_t> text, str, box1, box2;
    std::vector<int> stack;
    std::vector<Span> spans;
    std::vector<Cand> cands;
    std::vector<Hkl> delim, bare;
};
Scratch& scratch() {
    thread_local Scratch s;
    return s;
}

// ---------------------------------------------------------------------------
// A small backtracking matcher for the marker patterns.  Every element is
// m(text, i, k): it tries its ways of matching at i in the order Python's re
// tries them and calls the continuation k(end) for each, stopping at the first
// k that succeeds.  All patterns run on LOWER(text).

struct Lit {
    const char32_t* w;
    int len;
    template <class C, class K>
    bool m(const Str<C>& s, int i, const K& k) const {
        if (len > s.n - i) return false;
        for (int x = 0; x < len; ++x)
            if (s.lo(i + x) != u32(w[x])) return false;
        return k(i + len);
    }
};
template <size_t N>
constexpr Lit L(const char32_t (&w)[N]) {
    return Lit{w, int(N) - 1};
}

struct OneOf {  // a character class of literal characters
    const char32_t* w;
    int len;
    template <class C, class K>
    bool m(const Str<C>& s, int i, const K& k) const {
        if (i >= s.n) return false;
        const u32 c = s.lo(i);
        for (int x = 0; x < len; ++x)
            if (c == u32(w[x])) return k(i + 1);
        return false;
    }
};
template <size_t N>
constexpr OneOf S(const char32_t (&w)[N]) {
    return OneOf{w, int(N) - 1};
}

struct HRun {  // H* (min 0) or H+ (min 1), greedy
    int min;
    template <class C, class K>
    bool m(const Str<C>& s, int i, const K& k) const {
        int j = i;
        while (j < s.n && is_hspace(s[j])) ++j;
        for (int e = j; e >= i + min; --e)
            if (k(e)) return true;
        return false;
    }
};
constexpr HRun Hs{0};  // H*
constexpr HRun Hp{1};  // H+

template <class X>
struct Opt {
    X x;
    template <class C, class K>
    bool m(const Str<C>& s, int i, const K& k) const {
        return x.m(s, i, k) || k(i);
    }
};
template <class A, class B>
struct Seq2 {
    A a;
    B b;
    template <class C, class K>
    bool m(const Str<C>& s, int i, const K& k) const {
        return a.m(s, i, [&](int j) { return b.m(s, j, k); });
    }
};
template <class A, class B>
struct Alt2 {
    A a;
    B b;
    template <class C, class K>
    bool m(const Str<C>& s, int i, const K& k) const {
        return a.m(s, i, k) || b.m(s, i, k);
    }
};

template <class A>
constexpr A seq(A a) {
    return a;
}
template <class A, class B, class... R>
constexpr auto seq(A a, B b, R... r) {
    auto rest = seq(b, r...);
    return Seq2<A, decltype(rest)>{a, rest};
}
template <class A>
constexpr A alt(A a) {
    return a;
}
template <class A, class B, class... R>
constexpr auto alt(A a, B b, R... r) {
    auto rest = alt(b, r...);
    return Alt2<A, decltype(rest)>{a, rest};
}
template <class X>
constexpr Opt<X> opt(X x) {
    return Opt<X>{x};
}

// Python re.match at i: end of the match, or -1.
template <class P, class C>
inline int rx_match(const P& pat, const Str<C>& s, int i) {
    int end = -1;
    pat.m(s, i, [&](int j) {
        end = j;
        return true;
    });
    return end;
}

const auto RX_STARS = alt(L(U"**"), L(U"__"));
const auto RX_CONN = alt(seq(Hs, S(U":\uff1a=")), seq(Hp, alt(L(U"is"), L(U"are"))),
                         seq(Hp, alt(L(U"would"), L(U"should"), L(U"will"), L(U"must")), Hp, L(U"be")));
const auto RX_BOLD = opt(seq(Hs, RX_STARS));
const auto RX_ANSWER = seq(L(U"answer"), opt(L(U"s")), opt(L(U"(s)")),
                           opt(seq(Hp, alt(L(U"choice"), L(U"option"), L(U"letter")), opt(L(U"s")))), RX_BOLD, RX_CONN);
const auto RX_HEADING = seq(L(U"answer"), opt(L(U"s")), RX_BOLD, Hs, S(U"\r\n"));
const auto RX_CORRECT =
    seq(alt(L(U"correct"), L(U"right"), L(U"true"), L(U"best")), Hp,
        alt(L(U"option"), L(U"choice"), L(U"statement"), L(U"answer")), opt(L(U"s")), opt(L(U"(s)")), RX_BOLD, RX_CONN);
const auto RX_CHOOSE = alt(
    seq(L(U"i"), opt(alt(seq(Hp, alt(L(U"would"), L(U"will"))), L(U"'d"), L(U"\u2019d"), L(U"'ll"), L(U"\u2019ll"))),
        Hp, alt(L(U"choose"), L(U"select"), L(U"pick"), seq(L(U"go"), Hp, L(U"with")))),
    seq(L(U"my"), Hp, opt(seq(L(U"final"), Hp)), alt(L(U"choice"), L(U"selection"), L(U"pick")), opt(L(U"s")),
        RX_CONN));
const auto RX_CHINESE = seq(alt(L(U"\u7b54\u6848"), seq(L(U"\u6b63\u786e"), opt(L(U"\u7684")), L(U"\u9009\u9879")),
                                L(U"\u6b63\u786e\u7684\u662f"), L(U"\u9009\u62e9"), L(U"\u9009")),
                            opt(alt(L(U"\u5e94\u8be5\u662f"), L(U"\u5e94\u8be5\u4e3a"), L(U"\u5e94\u4e3a"),
                                    L(U"\u5e94\u662f"), L(U"\u662f"), L(U"\u4e3a"))));
const auto RX_TAG = L(U"<answer>");
const auto RX_BOXED = seq(L(U"\\"), alt(L(U"boxed"), L(U"fbox")), Hs, L(U"{"));
const auto RX_REVERSE = seq(alt(L(U"option"), L(U"choice"), L(U"statement")), opt(L(U"s")), Hp);
const auto RX_REVERSE_TAIL = seq(Hp, alt(L(U"is"), L(U"are")), Hp, opt(seq(L(U"the"), Hp)),
                                 opt(alt(seq(L(U"both"), Hp), seq(L(U"all"), Hp), seq(L(U"also"), Hp))),
                                 alt(L(U"correct"), L(U"right"), L(U"true")));
const auto RX_HKL_MARK =
    alt(seq(L(U"hk"), opt(L(U"i")), L(U"l"), opt(L(U"s"))),
        seq(L(U"miller"), Hp, L(U"ind"), alt(L(U"ices"), L(U"exes"), L(U"ex"))),
        seq(alt(L(U"peak"), L(U"reflection")), opt(L(U"s")),
            alt(RX_CONN, seq(Hp, L(U"correspond"), opt(alt(L(U"s"), L(U"ing"))), Hp, L(U"to")))),
        seq(alt(L(U"strongest"), seq(L(U"most"), Hp, L(U"intense")), seq(L(U"highest"), opt(seq(Hp, L(U"intensity")))),
                seq(L(U"maximum"), opt(seq(Hp, L(U"intensity")))), L(U"tallest"), L(U"dominant")),
            Hp, opt(seq(alt(L(U"diffraction"), L(U"xrd"), L(U"bragg")), Hp)), alt(L(U"peak"), L(U"reflection")),
            opt(L(U"s"))));

// Prefilter of the marker scan: the first three characters of every match,
// lowered, with each non-ASCII character mapped to 0x7F when it is U+00A0,
// U+3000 or U+2019 (it can follow "i" in CHOOSE or "my" there) and to 0
// otherwise; matches of CHINESE (non-ASCII start) are checked apart.  The
// trigrams go into a hashed bit set: a clear bit means no pattern starts here.
inline u32 trigram_char(unsigned char c) { return lower(c) & 0x7Fu; }  // the ASCII path has no byte >= 0x80
inline u32 trigram_char(char32_t c) {
    if (c < 0x80) return lower(c);
    return (c == 0xA0 || c == 0x3000 || c == 0x2019) ? 0x7F : 0;
}
constexpr u32 trigram_hash(u32 a, u32 b, u32 c) { return (((a << 14) | (b << 7) | c) * 2654435761u) >> 16; }  // < 2^16
struct TrigramSet {
    uint64_t bits[1024] = {};
    constexpr void add(u32 a, u32 b, u32 c) {
        const u32 h = trigram_hash(a, b, c);
        bits[h >> 6] |= uint64_t(1) << (h & 63);
    }
    constexpr bool has(u32 h) const { return (bits[h >> 6] >> (h & 63)) & 1u; }
};
constexpr TrigramSet kMarkerTrigrams = [] {
    TrigramSet t{};
    const char* fixed[] = {"ans", "cor", "rig", "tru", "bes", "opt", "cho", "sta", "hkl", "hki",  "mil",
                           "pea", "ref", "str", "mos", "hig", "max", "tal", "dom", "<an", "\\bo", "\\fb"};
    for (const char* w : fixed) t.add(u32(w[0]), u32(w[1]), u32(w[2]));
    const u32 hs[] = {u32(' '), u32('\t'), 0x7Fu};  // H (U+00A0 and U+3000 map to 0x7F)
    for (u32 h : hs) {
        for (u32 c = 0; c < 128; ++c) t.add(u32('i'), h, c);  // i H...
        t.add(u32('m'), u32('y'), h);                         // my H
    }
    for (u32 q : {u32('\''), 0x7Fu})  // i'd i'll (also with U+2019)
        for (u32 c : {u32('d'), u32('l')}) t.add(u32('i'), q, c);
    return t;
}();

enum Pat { P_ANSWER, P_HEADING, P_CORRECT, P_CHOOSE, P_CHINESE, P_TAG, P_HKL, P_BOXED, P_REVERSE, P_COUNT };
enum Kind { K_FORWARD = 0, K_BOXED = 1, K_REVERSE = 2 };

// All marker candidates of one task (rule C2 / H2), sorted as the reference
// tries them.  One left-to-right pass; each pattern keeps its own finditer
// resume position.
template <class C>
void marker_candidates(const Str<C>& t, bool hkl, std::vector<Cand>& out) {
    out.clear();
    int next[P_COUNT] = {0};
    const int n = t.n;
    auto attempt = [&](const auto& pat, int id, int i) {
        if (i < next[id]) return;
        const int e = rx_match(pat, t, i);
        if (e < 0) return;
        next[id] = e;
        if (id == P_BOXED) {
            const int close = match_brace(t, e - 1);
            if (close >= 0) out.push_back({e, K_BOXED, close});
        } else if (letter_bounded(t, i, e)) {
            out.push_back({e, id == P_REVERSE ? K_REVERSE : K_FORWARD, -1});
        }
    };
    const C* const p = t.p;
    // rolling key of the lowered trigram at i (characters past the end are 0)
    u32 key = ((n > 0 ? trigram_char(p[0]) : 0) << 7) | (n > 1 ? trigram_char(p[1]) : 0);
    for (int i = 0; i < n; ++i) {
        key = ((key << 7) | (i + 2 < n ? trigram_char(p[i + 2]) : 0)) & 0x1FFFFFu;
        if (!kMarkerTrigrams.has((key * 2654435761u) >> 16)) {
            if (key >> 14 || (p[i] != 0x7B54 && p[i] != 0x6B63 && p[i] != 0x9009)) continue;
        }
        const u32 raw = t[i];
        const u32 raw2 = i + 1 < n ? t[i + 1] : kNoChar;
        // a pattern is only tried where it can match, so the finditer state is unchanged
        const u32 c = lower(raw);
        const u32 c2 = raw2 == kNoChar ? kNoChar : lower(raw2);
        switch (c) {
            case 'a':
                if (c2 != 'n') break;
                attempt(RX_ANSWER, P_ANSWER, i);
                attempt(RX_HEADING, P_HEADING, i);
                break;
            case 'c':
                if (c2 == 'o')
                    attempt(RX_CORRECT, P_CORRECT, i);
                else if (c2 == 'h' && !hkl)
                    attempt(RX_REVERSE, P_REVERSE, i);
                break;
            case 'r':
                if (c2 == 'i')
                    attempt(RX_CORRECT, P_CORRECT, i);
                else if (c2 == 'e' && hkl)
                    attempt(RX_HKL_MARK, P_HKL, i);
                break;
            case 't':
                if (c2 == 'r')
                    attempt(RX_CORRECT, P_CORRECT, i);
                else if (c2 == 'a' && hkl)
                    attempt(RX_HKL_MARK, P_HKL, i);
                break;
            case 'b':
                if (c2 == 'e') attempt(RX_CORRECT, P_CORRECT, i);
                break;
            case 'i':
                if (is_hspace(c2) || c2 == '\'' || c2 == 0x2019) attempt(RX_CHOOSE, P_CHOOSE, i);
                break;
            case 'm':
                if (c2 == 'y')
                    attempt(RX_CHOOSE, P_CHOOSE, i);
                else if (hkl && (c2 == 'i' || c2 == 'o' || c2 == 'a'))
                    attempt(RX_HKL_MARK, P_HKL, i);
                break;
            case 'o':
                if (c2 == 'p' && !hkl) attempt(RX_REVERSE, P_REVERSE, i);
                break;
            case 's':
                if (c2 == 't') {
                    if (!hkl)
                        attempt(RX_REVERSE, P_REVERSE, i);
                    else
                        attempt(RX_HKL_MARK, P_HKL, i);
                }
                break;
            case 'h':
                if (hkl && (c2 == 'k' || c2 == 'i')) attempt(RX_HKL_MARK, P_HKL, i);
                break;
            case 'p':
                if (hkl && c2 == 'e') attempt(RX_HKL_MARK, P_HKL, i);
                break;
            case 'd':
                if (hkl && c2 == 'o') attempt(RX_HKL_MARK, P_HKL, i);
                break;
            case '<':
                if (c2 == 'a') attempt(RX_TAG, P_TAG, i);
                break;
            case '\\':
                if (c2 == 'b' || c2 == 'f') attempt(RX_BOXED, P_BOXED, i);
                break;
            case 0x7B54:  // 答
            case 0x6B63:  // 正
            case 0x9009:  // 选
                attempt(RX_CHINESE, P_CHINESE, i);
                break;
            default:
                break;
        }
    }
    // by position, largest first; ties in the order forward, boxed, reverse
    std::sort(out.begin(), out.end(),
              [](const Cand& x, const Cand& y) { return x.pos != y.pos ? x.pos > y.pos : x.kind < y.kind; });
}

// ---------------------------------------------------------------------------
// LIST grammar (multiple choice)

struct Item {
    u32 mask;
    int end;
    bool bracketed;
};

// ITEM at i (rule L1)
template <class C>
bool read_item(const Str<C>& t, int i, Item& out) {
    const int n = t.n;
    int j = i;
    if (t.has(j, U"**")) j += 2;
    int closers = 0;  // 1: ) or ）, 2: ]
    if (j < n) {
        const u32 c = t[j];
        if (c == '(' || c == 0xFF08)
            closers = 1;
        else if (c == '[')
            closers = 2;
        if (closers) ++j;
    }
    if (j >= n || !is_letter(t[j]) || letter_at(t, j - 1)) return false;
    int k = j;
    while (k < n && is_letter(t[k])) ++k;
    u32 mask = 0;
    if (k - j == 1) {
        mask = 1u << ((t[j] | 0x20u) - u32('a'));
    } else {
        for (int x = j; x < k; ++x) {
            const u32 c = t[x];
            if (!is_upper(c) || (x > j && t[x - 1] >= c)) return false;
            mask |= 1u << (c - u32('A'));
        }
    }
    bool bracketed = false;
    if (closers) {
        const u32 c = t.at(k);
        if ((closers == 1 && (c == ')' || c == 0xFF09)) || (closers == 2 && c == ']')) {
            ++k;
            bracketed = true;
        } else {
            return false;
        }
    } else if (k < n && (t[k] == ')' || t[k] == 0xFF09)) {
        ++k;
        bracketed = true;
    }
    if (t.has(k, U"**")) k += 2;
    out = Item{mask, k, bracketed};
    return true;
}

template <class C>
int sep_word(const Str<C>& t, int i) {
    if (t.lhas(i, U"and") && !letter_at(t, i + 3) && !letter_at(t, i - 1)) return 3;
    if (t.has(i, U"\u4ee5\u53ca")) return 2;  // 以及
    const u32 c = t.at(i);
    if (c == 0x548C || c == 0x53CA) return 1;  // 和 及
    return 0;
}

// A LaTeX opener \text{ \textbf{ \textrm{ \mathrm{ \mathbf{ at i: its length, or 0
template <class C>
int latex_opener(const Str<C>& t, int i) {
    if (t.lhas(i, U"\\text{")) return 6;
    if (t.lhas(i, U"\\textbf{") || t.lhas(i, U"\\textrm{") || t.lhas(i, U"\\mathrm{") || t.lhas(i, U"\\mathbf{"))
        return 8;
    return 0;
}

// End of a SEP at i, or -1 (rule L2)
template <class C>
int skip_sep(const Str<C>& t, int i) {
    while (i < t.n && (t[i] == '}' || t[i] == '$')) ++i;  // CLOSERS
    int k = skip_hspace(t, i);
    bool got = k > i;
    if (k < t.n && in_set(t[k], U",\uff0c\u3001;\uff1b/&+")) {
        k = skip_hspace(t, k + 1);
        got = true;
    }
    const int w = sep_word(t, k);
    if (w) {
        k = skip_hspace(t, k + w);
        got = true;
    }
    if (!got) return -1;
    if (t.at(k) == '$') ++k;  // OPENERS
    return k + latex_opener(t, k);
}

constexpr int kGlossMax = 200;

// End of a GLOSS at i, or -1 (rule L1)
template <class C>
int gloss_end(const Str<C>& t, int i) {
    const int k = skip_hspace(t, i);
    const int n = t.n;
    if (k >= n || (t[k] != '(' && t[k] != 0xFF08)) return -1;
    int j = k + 1;
    const int limit = std::min(n, j + kGlossMax + 1);
    while (j < limit && !in_set(t[j], U"()\uff08\uff09\n\r")) ++j;
    if (j == k + 1 || j >= n || (t[j] != ')' && t[j] != 0xFF09) || j - k - 1 > kGlossMax) return -1;
    return j + 1;
}

// LIST at i (rules L0-L3)
template <class C>
bool read_list(const Str<C>& t, int i, Item& out) {
    if (t.lhas(i, U"n/a") && !letter_at(t, i + 3)) return false;
    Item item;
    if (!read_item(t, i, item)) return false;
    u32 mask = item.mask;
    int end = item.end;
    bool bracketed = item.bracketed;
    bool glossed = false;
    for (;;) {
        const int k = skip_sep(t, end);
        if (k < 0 || !read_item(t, k, item)) {
            const int g = glossed ? -1 : gloss_end(t, end);
            if (g < 0) break;
            end = g;
            glossed = true;
            continue;
        }
        mask |= item.mask;
        end = item.end;
        bracketed = item.bracketed;
        glossed = false;
    }
    out = Item{mask, end, bracketed};
    return true;
}

template <class C>
bool or_word(const Str<C>& t, int i) {
    if (t.lhas(i, U"and/or") && !letter_at(t, i + 6)) return true;
    if (t.lhas(i, U"or") && !letter_at(t, i + 2)) return true;
    return t.has(i, U"\u6216") || t.has(i, U"\u8fd8\u662f");  // 或 还是
}

template <class C>
bool term_word(const Str<C>& t, int a, int b) {
    switch (b - a) {
        case 2:
            return word_is(t, a, b, U"as") || word_is(t, a, b, U"is") || word_is(t, a, b, U"so");
        case 3:
            return word_is(t, a, b, U"are") || word_is(t, a, b, U"was") || word_is(t, a, b, U"for") ||
                   word_is(t, a, b, U"due") || word_is(t, a, b, U"and") || word_is(t, a, b, U"but");
        case 4:
            return word_is(t, a, b, U"were") || word_is(t, a, b, U"that") || word_is(t, a, b, U"with") ||
                   word_is(t, a, b, U"only");
        case 5:
            return word_is(t, a, b, U"since") || word_is(t, a, b, U"which") || word_is(t, a, b, U"based") ||
                   word_is(t, a, b, U"given") || word_is(t, a, b, U"while");
        case 7:
            return word_is(t, a, b, U"because") || word_is(t, a, b, U"whereas");
        default:
            return false;
    }
}
template <class C>
bool copula(const Str<C>& t, int a, int b) {
    return word_is(t, a, b, U"is") || word_is(t, a, b, U"are") || word_is(t, a, b, U"was") || word_is(t, a, b, U"were");
}
template <class C>
bool negation(const Str<C>& t, int a, int b) {
    return word_is(t, a, b, U"not") || word_is(t, a, b, U"incorrect") || word_is(t, a, b, U"wrong") ||
           word_is(t, a, b, U"false") || word_is(t, a, b, U"invalid");
}

// TERMINATOR at the end i of a list (rule L4)
template <class C>
bool terminated(const Str<C>& t, int i, bool bracketed) {
    const int n = t.n;
    const int k = skip_hspace(t, i);
    int k2 = k;
    if (k2 < n && in_set(t[k2], U",\uff0c;\uff1b")) k2 = skip_hspace(t, k2 + 1);
    if (or_word(t, k2)) return false;
    if (k >= n) return true;
    const u32 c = t[k];
    if (in_set(c, U".,;!?\u3002\uff0c\uff1b\uff01\uff1f\u3001\u2026)]}\uff08\uff09*\"'$`<\n\r") || is_cjk(c))
        return true;
    if (c == '\\' && (t.at(k + 1) == ')' || t.at(k + 1) == ']')) return true;
    if (k == i) return false;
    if (bracketed || c == '(' || c == '-' || c == 0x2013 || c == 0x2014) return true;
    const int we = word_end(t, k);
    if (term_word(t, k, we)) {
        if (copula(t, k, we)) {
            const int a = skip_hspace(t, we);
            if (negation(t, a, word_end(t, a))) return false;
        }
        return true;
    }
    return false;
}

template <class C>
bool skip_word(const Str<C>& t, int a, int b) {
    switch (b - a) {
        case 3:
            return word_is(t, a, b, U"the");
        case 4:
            return word_is(t, a, b, U"thus") || word_is(t, a, b, U"most") || word_is(t, a, b, U"both");
        case 5:
            return word_is(t, a, b, U"hence");
        case 6:
            return word_is(t, a, b, U"option") || word_is(t, a, b, U"choice") || word_is(t, a, b, U"letter") ||
                   word_is(t, a, b, U"likely");
        case 7:
            return word_is(t, a, b, U"options") || word_is(t, a, b, U"choices") || word_is(t, a, b, U"letters") ||
                   word_is(t, a, b, U"clearly");
        case 8:
            return word_is(t, a, b, U"probably");
        case 9:
            return word_is(t, a, b, U"statement") || word_is(t, a, b, U"therefore");
        case 10:
            return word_is(t, a, b, U"statements") || word_is(t, a, b, U"definitely");
        default:
            return false;
    }
}

// SKIP after a marker
template <class C>
int skip_after_marker(const Str<C>& t, int i) {
    const int n = t.n;
    while (i < n) {
        const u32 c = t[i];
        if (is_space(c) || in_set(c, U"*_`\"'$:\uff1a")) {
            ++i;
            continue;
        }
        if (c == '\\') {
            const int len = t.at(i + 1) == '(' || t.at(i + 1) == '[' ? 2 : latex_opener(t, i);
            if (!len) break;
            i += len;
            continue;
        }
        if (t.has(i, U"\u9009\u9879")) {  // 选项
            i += 2;
            continue;
        }
        if (is_letter(c) && !letter_at(t, i - 1)) {
            const int we = word_end(t, i);
            if (skip_word(t, i, we)) {
                i = we;
                continue;
            }
        }
        break;
    }
    return i;
}

// EXACT-LIST
template <class C>
bool exact_list(const Str<C>& s0, u32& mask) {
    const Str<C> s = strip_wrappers(s0);
    const int i = skip_after_marker(s, 0);
    Item r;
    if (!read_list(s, i, r) || r.end != s.n) return false;
    mask = r.mask;
    return true;
}

// The content of a \boxed{...} with LaTeX commands removed, for EXACT-LIST.
template <class C>
Str<char32_t> boxed_text(const Str<C>& t, int a, int b) {
    Scratch& sc = scratch();
    auto& p1 = sc.box1;
    auto& p2 = sc.box2;
    p1.clear();
    p2.clear();
    for (int i = a; i < b;) {  // \\[A-Za-z]+ -> ""
        if (t[i] == '\\' && i + 1 < b && is_letter(t[i + 1])) {
            i += 2;
            while (i < b && is_letter(t[i])) ++i;
            continue;
        }
        p1.push_back(char32_t(t[i]));
        ++i;
    }
    const int m = int(p1.size());
    for (int i = 0; i < m;) {  // \\[^A-Za-z] -> " ", then ~ -> " ", drop { }
        u32 c = p1[i];
        if (c == '\\' && i + 1 < m && !is_letter(p1[i + 1])) {
            p2.push_back(U' ');
            i += 2;
            continue;
        }
        ++i;
        if (c == '{' || c == '}') continue;
        p2.push_back(c == '~' ? U' ' : char32_t(c));
    }
    return Str<char32_t>{p2.data(), int(p2.size())};
}

// BULLETS after a forward marker at pos: 0 when the rule does not apply, 1
// when a bullet line fails (the candidate fails), 2 with the union in mask.
template <class C>
int bullet_list(const Str<C>& t, int pos, u32& mask) {
    const int n = t.n;
    if (pos > 0 && is_break(t[pos - 1])) --pos;  // HEADING: the match already ended the line
    int k = pos;
    while (k < n && (is_hspace(t[k]) || in_set(t[k], U"*_:\uff1a"))) ++k;
    if (k >= n || !is_break(t[k])) return 0;
    u32 acc = 0;
    int count = 0;
    for (;;) {
        const int j = skip_space(t, k);
        if (j + 1 >= n || !in_set(t[j], U"-*\u2022") || !is_hspace(t[j + 1])) break;
        const int le = line_end(t, j, n);
        const int i = skip_after_marker(t, j + 1);
        Item lst;
        if (i >= le || !read_list(t, i, lst) || !terminated(t, lst.end, lst.bracketed)) return 1;
        acc |= lst.mask;
        ++count;
        k = le;
    }
    if (!count) return 0;
    mask = acc;
    return 2;
}

// C2 for the letters: true when a candidate gives a list.
template <class C>
bool choices_from_markers(const Str<C>& t, u32& mask) {
    auto& cands = scratch().cands;
    marker_candidates(t, false, cands);
    for (const Cand& cd : cands) {
        if (cd.kind == K_BOXED) {
            if (exact_list(boxed_text(t, cd.pos, cd.close), mask)) return true;
            continue;
        }
        if (cd.kind == K_FORWARD) {
            const int b = bullet_list(t, cd.pos, mask);
            if (b == 1) continue;
            if (b == 2) return true;
        }
        const int start = cd.kind == K_FORWARD ? skip_after_marker(t, cd.pos) : cd.pos;
        Item lst;
        if (!read_list(t, start, lst) || !terminated(t, lst.end, lst.bracketed)) continue;
        if (cd.kind == K_REVERSE) {
            const int e = rx_match(RX_REVERSE_TAIL, t, lst.end);
            if (e < 0 || letter_at(t, e)) continue;
        }
        mask = lst.mask;
        return true;
    }
    return false;
}

// ---------------------------------------------------------------------------
// Miller indices

inline bool hkl_open(u32 c, u32& close) {
    switch (c) {
        case '(':
            close = ')';
            return true;
        case '[':
            close = ']';
            return true;
        case '{':
            close = '}';
            return true;
        case '<':
            close = '>';
            return true;
        case 0x27E8:
            close = 0x27E9;
            return true;
        case 0xFF08:
            close = 0xFF09;
            return true;
        default:
            return false;
    }
}
inline bool is_minus(u32 c) { return c == '-' || c == 0x2212; }

struct Piece {
    bool bar;
    bool neg;
    int nd;         // number of digits (a digit piece); only the first 4 are stored
    int64_t value;  // a bar piece's value
    uint8_t d[4];
    bool over[4];
    int end;
};

// PIECE at i
template <class C>
bool read_piece(const Str<C>& s, int i, int end, Piece& p) {
    if (i >= end) return false;
    int plen = 0;
    if (s.has(i, U"\\overline{"))
        plen = 10;
    else if (s.has(i, U"\\bar{"))
        plen = 5;
    if (plen) {
        const int j = i + plen;
        int k = j;
        while (k < end && is_digit(s[k])) ++k;
        if (k == j || k - j > 3 || k >= end || s[k] != '}') return false;
        int64_t v = 0;
        for (int x = j; x < k; ++x) v = v * 10 + (s[x] - '0');
        p.bar = true;
        p.value = -v;
        p.end = k + 1;
        return true;
    }
    if (s.has(i, U"\\bar")) {
        if (i + 4 < end && is_digit(s[i + 4])) {
            p.bar = true;
            p.value = -int64_t(s[i + 4] - '0');
            p.end = i + 5;
            return true;
        }
        return false;
    }
    int j = i;
    p.bar = false;
    p.neg = false;
    if (is_minus(s[j])) {
        p.neg = true;
        ++j;
    }
    int nd = 0;
    while (j < end && is_digit(s[j])) {
        const uint8_t dig = uint8_t(s[j] - '0');
        ++j;
        const bool over = j < end && (s[j] == 0x304 || s[j] == 0x305);
        if (over) ++j;
        if (nd < 4) {
            p.d[nd] = dig;
            p.over[nd] = over;
        }
        ++nd;
    }
    if (!nd) return false;
    p.nd = nd;
    p.end = j;
    return true;
}

// COMPACT indices of np pieces (np <= 4); false when invalid or not 3/4 long.
inline bool compact_indices(const Piece* ps, int np, Hkl& out) {
    int m = 0;
    for (int x = 0; x < np; ++x) {
        const Piece& p = ps[x];
        if (p.bar) {
            if (m >= 4) return false;
            out.idx[m++] = p.value;
            continue;
        }
        if (p.nd > 4) return false;
        for (int y = 0; y < p.nd; ++y) {
            bool neg = p.over[y];
            if (y == 0 && p.neg) {
                if (p.over[y]) return false;
                neg = true;
            }
            if (m >= 4) return false;
            out.idx[m++] = neg ? -int64_t(p.d[y]) : int64_t(p.d[y]);
        }
    }
    if (m != 3 && m != 4) return false;
    out.n = m;
    return true;
}

// SPACED indices of np pieces (np <= 4)
inline bool spaced_indices(const Piece* ps, int np, Hkl& out) {
    if (np != 3 && np != 4) return false;
    for (int x = 0; x < np; ++x) {
        const Piece& p = ps[x];
        if (p.bar) {
            out.idx[x] = p.value;
            continue;
        }
        if (p.nd > 3) return false;
        bool any_over = false;
        for (int y = 0; y < p.nd; ++y) any_over |= p.over[y];
        if (any_over) {
            if (p.nd != 1 || p.neg) return false;
            out.idx[x] = -int64_t(p.d[0]);
            continue;
        }
        int64_t v = 0;
        for (int y = 0; y < p.nd; ++y) v = v * 10 + p.d[y];
        out.idx[x] = p.neg ? -v : v;
    }
    out.n = np;
    return true;
}

// DELIMITED token at the opener s[i]; on success tok and the end j.
template <class C>
bool read_delimited(const Str<C>& s, int i, int end, Hkl& tok, int& jout) {
    u32 close = 0;
    hkl_open(s[i], close);
    int j = skip_hspace(s, i + 1);
    Piece ps[4];
    int np = 0;
    bool separated = false, adjacent = false;
    for (;;) {
        Piece p;
        if (!read_piece(s, j, end, p)) return false;
        if (np == 4) return false;  // a fifth piece: five or more indices in either mode
        ps[np++] = p;
        j = p.end;
        int k = j, commas = 0;
        while (k < end && (is_hspace(s[k]) || s[k] == ',')) {
            commas += s[k] == ',';
            ++k;
        }
        if (commas > 1) return false;
        if (k < end && s[k] == close) {
            j = k + 1;
            break;
        }
        if (k + 1 < end && s[k] == '\\' && s[k + 1] == close) {
            j = k + 2;
            break;
        }
        if (k > j)
            separated = true;
        else
            adjacent = true;
        j = k;
    }
    if (separated && adjacent) return false;
    if (!(separated ? spaced_indices(ps, np, tok) : compact_indices(ps, np, tok))) return false;
    jout = j;
    return true;
}

template <class C>
bool bare_neighbour_ok(const Str<C>& s, int pos, int far) {
    if (pos < 0 || pos >= s.n) return true;
    const u32 c = s[pos];
    if (is_letter(c) || is_digit(c) || in_set(c, U"_/^\u00b0%#+\u00d7\\-\u2212'\u00c5\u03b8\u03bc\u00b5")) return false;
    if ((c == '.' || c == ',' || c == ':') && digit_at(s, far)) return false;
    return true;
}

// BARE run at i: returns 0 when there is no run (j = i), 1 for an invalid run,
// 2 for a valid token; j is the run end.
template <class C>
int read_bare(const Str<C>& s, int i, int end, Hkl& tok, int& j) {
    Piece ps[4];
    int np = 0;
    j = i;
    Piece p;
    while (read_piece(s, j, end, p)) {
        if (np < 4) ps[np] = p;
        ++np;
        j = p.end;
    }
    if (!np) return 0;
    if (np > 4 || !compact_indices(ps, np, tok)) return 1;
    if (tok.n == 4 && tok.idx[0] + tok.idx[1] + tok.idx[2] != 0) return 1;
    if (!bare_neighbour_ok(s, i - 1, i - 2) || !bare_neighbour_ok(s, j, j + 1)) return 1;
    return 2;
}

// SCAN(a, b): appends the tokens to out; true when there are any.
template <class C>
bool scan_hkls(const Str<C>& s, int a, int b, std::vector<Hkl>& out) {
    Scratch& sc = scratch();
    auto& delim = sc.delim;
    auto& bare = sc.bare;
    delim.clear();
    bare.clear();
    int i = a;
    Hkl tok;
    while (i < b) {
        const u32 c = s[i];
        u32 close;
        if (hkl_open(c, close)) {
            int j;
            if (read_delimited(s, i, b, tok, j)) {
                delim.push_back(tok);
                i = j;
            } else {
                ++i;
            }
            continue;
        }
        if (is_digit(c) || is_minus(c) || c == '\\') {
            int j;
            const int st = read_bare(s, i, b, tok, j);
            if (j > i) {
                if (st == 2) bare.push_back(tok);
                i = j;
                continue;
            }
        }
        ++i;
    }
    const auto& src = delim.empty() ? bare : delim;
    out.insert(out.end(), src.begin(), src.end());
    return !src.empty();
}

template <class C>
int skip_hkl_sep(const Str<C>& s, int i) {
    const int n = s.n;
    while (i < n) {
        const u32 c = s[i];
        if (is_space(c) || in_set(c, U",;\uff0c\u3001\uff1b&\u548c\u53ca")) {
            ++i;
        } else if (s.lhas(i, U"and") && !letter_at(s, i - 1) && !letter_at(s, i + 3)) {
            i += 3;
        } else {
            break;
        }
    }
    return i;
}

// EXACT-HKLS: appends to out; on failure out is left as it was.
template <class C>
bool exact_hkls(const Str<C>& s0, std::vector<Hkl>& out) {
    const Str<C> s = strip_wrappers(s0);
    const int n = s.n;
    if (!n) return false;
    const size_t mark = out.size();
    int i = 0;
    Hkl tok;
    u32 close;
    for (;;) {
        int j;
        if (hkl_open(s[i], close)) {
            if (!read_delimited(s, i, n, tok, j)) break;
        } else if (read_bare(s, i, n, tok, j) != 2) {
            break;
        }
        out.push_back(tok);
        const int k = skip_hkl_sep(s, j);
        if (k >= n) return true;
        if (k == j) break;
        i = k;
    }
    out.resize(mark);
    return false;
}

// CUT(a, b)
template <class C>
int sentence_cut(const Str<C>& s, int a, int b) {
    for (int k = a; k < b; ++k) {
        const u32 c = s[k];
        if (c == 0x3002 || c == 0xFF01 || c == 0xFF1F) return k;
        if (c == '.' || c == '!' || c == '?') {
            int j = k + 1;
            while (j < b && is_space(s[j])) ++j;
            if (k + 1 < j && j < b && is_upper(s[j])) return k;
        }
    }
    return b;
}

inline bool span_filler(u32 c) { return is_space(c) || in_set(c, U"*_#:\uff1a`$"); }

template <class C>
bool hkl_marker_span(const Str<C>& s, int pos, std::vector<Hkl>& out) {
    const int n = int(std::min<int64_t>(s.n, int64_t(pos) + kSpanMax));
    const int le = line_end(s, pos, n);
    if (scan_hkls(s, pos, sentence_cut(s, pos, le), out)) return true;
    for (int x = pos; x < le; ++x)
        if (!span_filler(s[x])) return false;
    int k = le, para_start = -1, para_end = -1;
    while (k < n) {
        k += (s[k] == '\r' && k + 1 < n && s[k + 1] == '\n') ? 2 : 1;
        const int e = line_end(s, k, n);
        if (blank(s, k, e)) {
            if (para_start >= 0) break;
        } else {
            if (para_start < 0) para_start = k;
            para_end = e;
        }
        k = e;
    }
    if (para_start < 0) return false;
    return scan_hkls(s, para_start, sentence_cut(s, para_start, para_end), out);
}

template <class C>
bool hkls_from_markers(const Str<C>& s, std::vector<Hkl>& out) {
    auto& cands = scratch().cands;
    marker_candidates(s, true, cands);
    const size_t tried = std::min<size_t>(cands.size(), kMaxHklCandidates);
    for (size_t x = 0; x < tried; ++x) {
        const Cand& cd = cands[x];
        const bool got = cd.kind == K_BOXED ? scan_hkls(s, cd.pos, cd.close, out) : hkl_marker_span(s, cd.pos, out);
        if (got) return true;
    }
    return false;
}

// ---------------------------------------------------------------------------
// bare answer (C3 / H3): the line structure of the text

template <class C>
struct Lines {
    const Str<C>& s;
    int count = 0, last_a = 0, last_b = 0;  // non-blank lines and the last one
    explicit Lines(const Str<C>& text) : s(text) {
        each([&](int a, int b) {
            ++count;
            last_a = a;
            last_b = b;
            return true;
        });
    }
    // f(a, b) for every non-blank line until f returns false; false if it did
    template <class F>
    bool each(const F& f) const {
        const int n = s.n;
        int start = 0, i = 0;
        while (i < n) {
            if (is_break(s[i])) {
                if (!blank(s, start, i) && !f(start, i)) return false;
                i += (s[i] == '\r' && i + 1 < n && s[i + 1] == '\n') ? 2 : 1;
                start = i;
            } else {
                ++i;
            }
        }
        if (!blank(s, start, n) && !f(start, n)) return false;
        return true;
    }
};

// OPTION-LINE (rule C3): one line that starts with an option letter and goes on with the option's text.
template <class C>
bool option_line(const Str<C>& t0, u32& mask) {
    int a = 0, b = t0.n;
    strip_space(t0, a, b);
    const Str<C> s = t0.sub(a, b);
    const int n = s.n;
    for (int x = 0; x < n; ++x)
        if (is_break(s[x])) return false;
    int i = s.has(0, U"**") ? 2 : 0;
    const int we = word_end(s, i);
    u32 letter;
    int j;
    if (word_is(s, i, we, U"option") || word_is(s, i, we, U"choice")) {
        const int k = skip_hspace(s, we);
        if (k == we || k >= n || !is_upper(s[k]) || letter_at(s, k + 1)) return false;
        if (!in_set(s.at(k + 1), U":\uff1a.)")) return false;
        letter = s[k];
        j = k + 2;
    } else if (i + 2 < n && (s[i] == '(' || s[i] == 0xFF08) && is_upper(s[i + 1]) &&
               (s[i + 2] == ')' || s[i + 2] == 0xFF09)) {
        letter = s[i + 1];
        j = i + 3;
    } else {
        return false;
    }
    if (s.has(j, U"**")) j += 2;
    const int k = skip_hspace(s, j);
    if (k >= n || !(is_cjk(s[k]) || (k > j && is_letter(s[k])))) return false;  // Chinese text needs no space
    const int e = word_end(s, k);
    if (term_word(s, k, e) || negation(s, k, e) || word_is(s, k, e, U"or") || word_is(s, k, e, U"correct") ||
        word_is(s, k, e, U"right") || word_is(s, k, e, U"true") || word_is(s, k, e, U"valid"))
        return false;
    mask = 1u << (letter - u32('A'));
    return true;
}

template <class C>
bool choices_bare(const Str<C>& t, u32& mask) {
    if (exact_list(t, mask)) return true;
    Lines<C> lines(t);
    if (lines.count < 2) return option_line(t, mask);
    u32 acc = 0;
    const bool all = lines.each([&](int a, int b) {
        u32 m;
        if (!exact_list(t.sub(a, b), m)) return false;
        acc |= m;
        return true;
    });
    if (all) {
        mask = acc;
        return true;
    }
    return exact_list(t.sub(lines.last_a, lines.last_b), mask) || option_line(t, mask);
}

template <class C>
bool hkls_bare(const Str<C>& t, std::vector<Hkl>& out) {
    if (exact_hkls(t, out)) return true;
    Lines<C> lines(t);
    if (lines.count < 2) return false;
    return exact_hkls(t.sub(lines.last_a, lines.last_b), out);
}

// ---------------------------------------------------------------------------
// JSON stage: json.loads, reproduced for the values it needs

enum class JR { Ok, Err, Und };     // parsed / json.loads fails / not reproduced here
constexpr int kMaxDepth = 200;      // deeper nesting may hit Python's recursion limit
constexpr int kMaxIntDigits = 640;  // the lowest int_max_str_digits Python allows

struct Keys {
    const char* names[8];
    int count;
};
const Keys kMcqKeys{
    {"final_answer", "answer", "answers", "correct_options", "choice", "choices", "selected", "options"}, 8};
const Keys kHklKeys{{"max_peak_hkls", "final_answer", "answer", "answers", "hkls", "hkl", "miller_indices"}, 7};

template <class C>
struct Json {
    Str<C> s;

    static bool ws(u32 c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
    int skip_ws(int i) const {
        while (i < s.n && ws(s[i])) ++i;
        return i;
    }
    static int hexval(u32 c) {
        if (is_digit(c)) return int(c - '0');
        if (c >= 'a' && c <= 'f') return int(c - 'a' + 10);
        if (c >= 'A' && c <= 'F') return int(c - 'A' + 10);
        return -1;
    }
    int hex4(int i) const {
        if (i + 4 > s.n) return -1;
        int v = 0;
        for (int x = 0; x < 4; ++x) {
            const int h = hexval(s[i + x]);
            if (h < 0) return -1;
            v = v * 16 + h;
        }
        return v;
    }

    // The string whose quote is at i: the index after its closing quote, or -1.
    // Decoded code points go to sink (lone surrogates are kept as code points,
    // as Python keeps them).
    template <class Sink>
    int string(int i, const Sink& sink) const {
        const int n = s.n;
        ++i;
        for (;;) {
            if (i >= n) return -1;
            u32 c = s[i];
            if (c == '"') return i + 1;
            if (c != '\\') {
                if (c < 0x20) return -1;
                sink(c);
                ++i;
                continue;
            }
            if (++i >= n) return -1;
            switch (s[i]) {
                case '"':
                    c = '"';
                    break;
                case '\\':
                    c = '\\';
                    break;
                case '/':
                    c = '/';
                    break;
                case 'b':
                    c = 8;
                    break;
                case 'f':
                    c = 12;
                    break;
                case 'n':
                    c = 10;
                    break;
                case 'r':
                    c = 13;
                    break;
                case 't':
                    c = 9;
                    break;
                case 'u': {
                    int e = i + 5;  // after the four hex digits
                    if (e >= n) return -1;
                    int v = hex4(i + 1);
                    if (v < 0) return -1;
                    if (v >= 0xD800 && v <= 0xDBFF && e + 6 < n && s[e] == '\\' && s[e + 1] == 'u') {
                        const int v2 = hex4(e + 2);
                        if (v2 < 0) return -1;
                        if (v2 >= 0xDC00 && v2 <= 0xDFFF) {
                            v = 0x10000 + ((v - 0xD800) << 10) + (v2 - 0xDC00);
                            e += 6;
                        }
                    }
                    sink(u32(v));
                    i = e;
                    continue;
                }
                default:
                    return -1;
            }
            sink(c);
            ++i;
        }
    }

    // A number at i (the C scanner's grammar): its end or -1.
    int number(int i, bool& is_float, int& int_digits) const {
        const int n = s.n;
        int j = i;
        is_float = false;
        if (j < n && s[j] == '-') ++j;
        if (j >= n) return -1;
        const int d0 = j;
        if (s[j] == '0') {
            ++j;
        } else if (s[j] >= '1' && s[j] <= '9') {
            while (j < n && is_digit(s[j])) ++j;
        } else {
            return -1;
        }
        int_digits = j - d0;
        if (j + 1 < n && s[j] == '.' && is_digit(s[j + 1])) {
            is_float = true;
            j += 2;
            while (j < n && is_digit(s[j])) ++j;
        }
        if (j + 1 < n && (s[j] == 'e' || s[j] == 'E')) {
            int k = j + 1;
            if (k + 1 < n && (s[k] == '-' || s[k] == '+')) ++k;
            const int ds = k;
            while (k < n && is_digit(s[k])) ++k;
            if (k > ds) {
                is_float = true;
                j = k;
            }
        }
        return j;
    }

    int value(int i, int depth, JR& r) const {
        const int n = s.n;
        if (i >= n) {
            r = JR::Err;
            return -1;
        }
        switch (s[i]) {
            case '"': {
                const int e = string(i, [](u32) {});
                if (e < 0) r = JR::Err;
                return e;
            }
            case '{':
                return object(i, depth + 1, r);
            case '[':
                return array(i, depth + 1, r);
            case 'n':
                if (s.has(i, U"null")) return i + 4;
                break;
            case 't':
                if (s.has(i, U"true")) return i + 4;
                break;
            case 'f':
                if (s.has(i, U"false")) return i + 5;
                break;
            case 'N':
                if (s.has(i, U"NaN")) return i + 3;
                break;
            case 'I':
                if (s.has(i, U"Infinity")) return i + 8;
                break;
            case '-':
                if (s.has(i, U"-Infinity")) return i + 9;
                break;
            default:
                break;
        }
        bool is_float;
        int digits;
        const int e = number(i, is_float, digits);
        if (e < 0) {
            r = JR::Err;
            return -1;
        }
        if (!is_float && digits > kMaxIntDigits) {
            r = JR::Und;
            return -1;
        }
        return e;
    }

    // Object at s[i] == '{'.  on_pair(key_start, value_start) is called for every pair.
    template <class F>
    int object_with(int i, int depth, JR& r, const F& on_pair) const {
        if (depth > kMaxDepth) {
            r = JR::Und;
            return -1;
        }
        const int n = s.n;
        i = skip_ws(i + 1);
        if (i < n && s[i] == '}') return i + 1;
        for (;;) {
            if (i >= n || s[i] != '"') break;
            const int key = i;
            i = string(i, [](u32) {});
            if (i < 0) break;
            i = skip_ws(i);
            if (i >= n || s[i] != ':') break;
            i = skip_ws(i + 1);
            const int val = i;
            i = value(i, depth, r);
            if (i < 0) return -1;
            on_pair(key, val);
            i = skip_ws(i);
            if (i < n && s[i] == '}') return i + 1;
            if (i >= n || s[i] != ',') break;
            i = skip_ws(i + 1);
        }
        r = JR::Err;
        return -1;
    }
    int object(int i, int depth, JR& r) const {
        return object_with(i, depth, r, [](int, int) {});
    }
    int array(int i, int depth, JR& r) const {
        if (depth > kMaxDepth) {
            r = JR::Und;
            return -1;
        }
        const int n = s.n;
        i = skip_ws(i + 1);
        if (i < n && s[i] == ']') return i + 1;
        for (;;) {
            i = value(i, depth, r);
            if (i < 0) return -1;
            i = skip_ws(i);
            if (i < n && s[i] == ']') return i + 1;
            if (i >= n || s[i] != ',') break;
            i = skip_ws(i + 1);
        }
        r = JR::Err;
        return -1;
    }

    // Elements of the (already validated) array at i: f(element_start) until f returns false.
    template <class F>
    bool each_element(int i, const F& f) const {
        i = skip_ws(i + 1);
        if (s[i] == ']') return true;
        for (;;) {
            if (!f(i)) return false;
            JR r = JR::Ok;
            i = skip_ws(value(i, 0, r));
            if (s[i] == ']') return true;
            i = skip_ws(i + 1);
        }
    }

    // The decoded string at i into the scratch buffer.
    Str<char32_t> decode(int i) const {
        auto& buf = scratch().str;
        buf.clear();
        string(i, [&](u32 c) { buf.push_back(char32_t(c)); });
        return Str<char32_t>{buf.data(), int(buf.size())};
    }

    // INT (for the hkl values): Ok with out set, Err when it is not an INT, Und.
    JR to_int(int i, int64_t& out) const {
        const u32 c = s[i];
        if (!(c == '-' || is_digit(c)) || s.has(i, U"-Infinity")) return JR::Err;
        bool is_float;
        int digits;
        const int e = number(i, is_float, digits);
        if (!is_float) {
            const bool neg = c == '-';
            uint64_t v = 0;
            for (int x = neg ? i + 1 : i; x < e; ++x) {
                if (v > (uint64_t(INT64_MAX) - 9) / 10) return JR::Und;
                v = v * 10 + (s[x] - '0');
            }
            out = neg ? -int64_t(v) : int64_t(v);
            return JR::Ok;
        }
        char buf[128];
        const int len = e - i;
        if (len >= int(sizeof buf)) return JR::Und;
        for (int x = 0; x < len; ++x) buf[x] = char(s[i + x]);
        double d = 0;
        const auto res = std::from_chars(buf, buf + len, d);
        if (res.ec != std::errc() || res.ptr != buf + len) return JR::Und;
        if (!std::isfinite(d)) return JR::Err;
        if (std::floor(d) != d) return JR::Err;
        if (!(std::fabs(d) < 9.2e18)) return JR::Und;
        out = int64_t(d);
        return JR::Ok;
    }

    // A list of 3 or 4 INTs at i.
    JR int_tuple(int i, Hkl& out) const {
        if (s[i] != '[') return JR::Err;
        int starts[4];
        int cnt = 0;
        each_element(i, [&](int e) {
            if (cnt < 4) starts[cnt] = e;
            ++cnt;
            return cnt <= 4;
        });
        if (cnt != 3 && cnt != 4) return JR::Err;
        bool und = false;  // a value too big for int64 still is an INT: any non-INT decides
        for (int x = 0; x < cnt; ++x) {
            const JR r = to_int(starts[x], out.idx[x]);
            if (r == JR::Err) return r;
            und |= r == JR::Und;
        }
        out.n = cnt;
        return und ? JR::Und : JR::Ok;
    }
};

// The first task key present in the top-level object (J2), with Python's dict
// semantics: a repeated key keeps its first place and takes its last value.
struct KeyHit {
    bool found[8] = {};
    char32_t orig[8][16];
    int len[8];
    int value[8];
};

// One candidate chunk (stripped, starts with '{' or '[').  kind: 0 nothing, 1
// a dict with a task key (vpos: its value), 2 a list.
template <class C>
JR parse_candidate(const Json<C>& J, const Keys& keys, int& kind, int& vpos) {
    kind = 0;
    JR r = JR::Ok;
    int e;
    if (J.s[0] == '[') {
        e = J.array(0, 1, r);
        if (e < 0) return r;
        if (J.skip_ws(e) != J.s.n) return JR::Err;
        kind = 2;
        vpos = 0;
        return JR::Ok;
    }
    KeyHit hit;
    e = J.object_with(0, 1, r, [&](int key, int val) {
        char32_t kb[16];
        int kl = 0;
        J.string(key, [&](u32 c) {
            if (kl < 16) kb[kl] = char32_t(c);
            ++kl;
        });
        if (kl > 15) return;
        for (int t = 0; t < keys.count; ++t) {
            const char* name = keys.names[t];
            const int nl = int(std::strlen(name));
            if (nl != kl) continue;
            int x = 0;
            while (x < kl && lower(u32(kb[x])) == u32(name[x])) ++x;
            if (x != kl) continue;
            if (!hit.found[t]) {
                hit.found[t] = true;
                std::memcpy(hit.orig[t], kb, sizeof(char32_t) * kl);
                hit.len[t] = kl;
                hit.value[t] = val;
            } else if (std::memcmp(hit.orig[t], kb, sizeof(char32_t) * kl) == 0) {
                hit.value[t] = val;
            }
            return;
        }
    });
    if (e < 0) return r;
    if (J.skip_ws(e) != J.s.n) return JR::Err;
    for (int t = 0; t < keys.count; ++t) {
        if (hit.found[t]) {
            kind = 1;
            vpos = hit.value[t];
            break;
        }
    }
    return JR::Ok;
}

// Reads a value; Found / None / Undecided.
template <class C>
Extracted read_choice_value(const Json<C>& J, int i, u32& mask) {
    const u32 c = J.s[i];
    if (c == '"') return exact_list(J.decode(i), mask) ? Extracted::Found : Extracted::None;
    if (c != '[') return Extracted::None;
    u32 acc = 0;
    const bool ok = J.each_element(i, [&](int e) {
        u32 m;
        if (J.s[e] != '"' || !exact_list(J.decode(e), m)) return false;
        acc |= m;
        return true;
    });
    if (!ok) return Extracted::None;
    mask = acc;
    return Extracted::Found;
}

template <class C>
Extracted read_hkl_value(const Json<C>& J, int i, std::vector<Hkl>& out) {
    const u32 c = J.s[i];
    if (c == '"') return exact_hkls(J.decode(i), out) ? Extracted::Found : Extracted::None;
    if (c != '[') return Extracted::None;
    int count = 0;
    bool list_or_str = false;
    J.each_element(i, [&](int e) {
        ++count;
        list_or_str |= J.s[e] == '[' || J.s[e] == '"';
        return true;
    });
    Hkl tup;
    if (count && !list_or_str) {
        const JR r = J.int_tuple(i, tup);
        if (r == JR::Und) return Extracted::Undecided;
        if (r == JR::Err) return Extracted::None;
        out.push_back(tup);
        return Extracted::Found;
    }
    bool und = false;  // an element out of reach: Undecided unless another element fails
    const bool ok = J.each_element(i, [&](int e) {
        if (J.s[e] == '"') return exact_hkls(J.decode(e), out);
        const JR r = J.int_tuple(e, tup);
        if (r == JR::Err) return false;
        if (r == JR::Und)
            und = true;
        else
            out.push_back(tup);
        return true;
    });
    if (!ok) return Extracted::None;
    return und ? Extracted::Undecided : Extracted::Found;
}

// Rules J1-J3.  Returns Undecided, None (a dict qualified, its value failed)
// or Found; `qualified` is false when no candidate qualifies.
template <class C, class Read>
Extracted json_stage(const Str<C>& t, const Keys& keys, const Read& read, bool& qualified) {
    qualified = false;
    const int n = t.n;
    const int first_brace = find_char(t, 0, '{');
    if (first_brace < 0 && find_char(t, 0, '[') < 0) return Extracted::None;  // every candidate starts with one
    Scratch& sc = scratch();
    auto& spans = sc.spans;
    spans.clear();
    int seq = 0;
    auto find3 = [&](int from) {
        for (int i = find_char(t, from, '`'); i >= 0 && i + 3 <= n; i = find_char(t, i + 1, '`'))
            if (t[i + 1] == '`' && t[i + 2] == '`') return i;
        return -1;
    };
    for (int i = 0;;) {  // a. fenced blocks
        const int a = find3(i);
        if (a < 0) break;
        int j = a + 3;
        while (j < n && (is_letter(t[j]) || is_digit(t[j]) || t[j] == '_' || t[j] == '+' || t[j] == '-')) ++j;
        const int b = find3(j);
        if (b < 0) break;
        spans.push_back({j, b, seq++, true});
        i = b + 3;
    }
    spans.push_back({0, n, seq++, true});  // b. the whole text
    auto& stack = sc.stack;                // c. balanced braces
    stack.clear();
    bool in_str = false, esc = false;
    for (int i = first_brace < 0 ? n : first_brace; i < n; ++i) {  // nothing happens before the first '{'
        const u32 c = t[i];
        if (in_str) {
            if (esc)
                esc = false;
            else if (c == '\\')
                esc = true;
            else if (c == '"')
                in_str = false;
            continue;
        }
        if (c == '{') {
            stack.push_back(i);
        } else if (c == '}') {
            if (!stack.empty()) {
                spans.push_back({stack.back(), i + 1, seq++, false});
                stack.pop_back();
            }
        } else if (c == '"' && !stack.empty()) {
            in_str = true;
        }
    }
    std::sort(spans.begin(), spans.end(), [](const Span& x, const Span& y) {
        if (x.b != y.b) return x.b > y.b;
        if (x.a != y.a) return x.a < y.a;
        return x.seq < y.seq;
    });
    for (const Span& sp : spans) {
        int a = sp.a, b = sp.b;
        strip_space(t, a, b);
        if (a >= b || (t[a] != '{' && t[a] != '[')) continue;
        if (!sp.bare) {
            bool quote = false;
            for (int i = a; i < b && !quote; ++i) quote = t[i] == '"';
            if (!quote) continue;
        }
        const Json<C> J{t.sub(a, b)};
        int kind, vpos;
        const JR r = parse_candidate(J, keys, kind, vpos);
        if (r == JR::Und) return Extracted::Undecided;
        if (r == JR::Err) continue;
        if (kind == 1) {
            qualified = true;
            return read(J, vpos);
        }
        if (kind == 2 && sp.bare) {
            const Extracted st = read(J, 0);
            if (st != Extracted::None) {
                qualified = true;
                return st;
            }
        }
    }
    return Extracted::None;
}

// ---------------------------------------------------------------------------
// entry points

template <class C>
Extracted choices_impl(const Str<C>& t, u32& mask) {
    bool qualified;
    const Extracted st =
        json_stage(t, kMcqKeys, [&](const auto& J, int i) { return read_choice_value(J, i, mask); }, qualified);
    if (qualified || st == Extracted::Undecided) return st;
    if (choices_from_markers(t, mask)) return Extracted::Found;
    return choices_bare(t, mask) ? Extracted::Found : Extracted::None;
}

template <class C>
Extracted hkls_impl(const Str<C>& t, std::vector<Hkl>& out) {
    bool qualified;
    const Extracted st = json_stage(
        t, kHklKeys,
        [&](const auto& J, int i) {
            out.clear();
            return read_hkl_value(J, i, out);
        },
        qualified);
    if (st == Extracted::Undecided) return st;
    if (!qualified) {
        out.clear();
        if (hkls_from_markers(t, out)) return Extracted::Found;
        out.clear();
        if (!hkls_bare(t, out)) return Extracted::None;
    } else if (st == Extracted::None) {
        return st;
    }
    return Extracted::Found;
}

// Python tuple order
inline bool hkl_less(const Hkl& x, const Hkl& y) {
    const int m = std::min(x.n, y.n);
    for (int k = 0; k < m; ++k)
        if (x.idx[k] != y.idx[k]) return x.idx[k] < y.idx[k];
    return x.n < y.n;
}
inline bool hkl_equal(const Hkl& x, const Hkl& y) {
    if (x.n != y.n) return false;
    for (int k = 0; k < x.n; ++k)
        if (x.idx[k] != y.idx[k]) return false;
    return true;
}

// Strict UTF-8 -> code points into out (grown as needed, never shrunk): the
// number of code points, or -1 on malformed input (incl. encoded surrogates).
int decode_utf8(std::string_view in, std::vector<char32_t>& out) {
    if (out.size() < in.size()) out.resize(in.size());
    const auto* p = reinterpret_cast<const unsigned char*>(in.data());
    char32_t* o = out.data();
    const size_t n = in.size();
    size_t i = 0, m = 0;
    while (i < n) {
        if (i + 8 <= n) {  // eight ASCII bytes at once
            uint64_t w;
            std::memcpy(&w, p + i, 8);
            if (!(w & 0x8080808080808080ull)) {
                for (int x = 0; x < 8; ++x) o[m + x] = p[i + x];
                m += 8;
                i += 8;
                continue;
            }
        }
        const u32 b0 = p[i];
        if (b0 < 0x80) {
            o[m++] = b0;
            ++i;
            continue;
        }
        int len;
        u32 cp, lo = 0x80, hi = 0xBF;
        if (b0 >= 0xC2 && b0 <= 0xDF) {
            len = 2;
            cp = b0 & 0x1F;
        } else if (b0 >= 0xE0 && b0 <= 0xEF) {
            len = 3;
            cp = b0 & 0x0F;
            if (b0 == 0xE0) lo = 0xA0;
            if (b0 == 0xED) hi = 0x9F;
        } else if (b0 >= 0xF0 && b0 <= 0xF4) {
            len = 4;
            cp = b0 & 0x07;
            if (b0 == 0xF0) lo = 0x90;
            if (b0 == 0xF4) hi = 0x8F;
        } else {
            return -1;
        }
        if (i + len > n) return -1;
        for (int x = 1; x < len; ++x) {
            const u32 b = p[i + x];
            if (b < (x == 1 ? lo : 0x80u) || b > (x == 1 ? hi : 0xBFu)) return -1;
            cp = (cp << 6) | (b & 0x3F);
        }
        o[m++] = char32_t(cp);
        i += len;
    }
    return int(m);
}

bool is_ascii(std::string_view s) {
    unsigned char acc = 0;
    for (const char ch : s) acc |= static_cast<unsigned char>(ch);
    return acc < 0x80;
}

// Runs f on the text as a Str<unsigned char> (ASCII) or Str<char32_t>;
// fold_width: FOLD-WIDTH first (the multiple-choice rules).
template <class F>
Extracted with_text(std::string_view text, const F& f, bool fold_width = false) {
    if (text.size() > size_t(INT_MAX / 4)) return Extracted::Undecided;
    if (is_ascii(text)) {
        const Str<unsigned char> t{reinterpret_cast<const unsigned char*>(text.data()), int(text.size())};
        return f(t);
    }
    auto& buf = scratch().text;
    const int n = decode_utf8(text, buf);
    if (n < 0) return Extracted::Undecided;
    if (fold_width)
        for (int i = 0; i < n; ++i)
            if ((buf[i] >= 0xFF21 && buf[i] <= 0xFF3A) || (buf[i] >= 0xFF41 && buf[i] <= 0xFF5A)) buf[i] -= 0xFEE0;
    const Str<char32_t> t{buf.data(), n};
    return f(t);
}

}  // namespace

Extracted extract_choices(std::string_view text, uint32_t& letters) {
    letters = 0;
    u32 mask = 0;
    const Extracted st = with_text(text, [&](const auto& t) { return choices_impl(t, mask); }, true);
    if (st == Extracted::Found) letters = mask;
    return st;
}

Extracted extract_hkls(std::string_view text, std::vector<Hkl>& out) {
    out.clear();
    const Extracted st = with_text(text, [&](const auto& t) { return hkls_impl(t, out); });
    if (st != Extracted::Found) {
        out.clear();
        return st;
    }
    std::sort(out.begin(), out.end(), hkl_less);
    out.erase(std::unique(out.begin(), out.end(), hkl_equal), out.end());
    return st;
}

// ---------------------------------------------------------------------------
// bindings (for tests and direct use)

namespace {

// UTF-8 of a Python str, or false when it has none (lone surrogates).
bool utf8_of(py::handle h, std::string_view& out) {
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(h.ptr(), &size);
    if (!data) {
        PyErr_Clear();
        return false;
    }
    out = std::string_view(data, size_t(size));
    return true;
}

py::object choices_py(py::handle text) {
    if (!PyUnicode_Check(text.ptr())) return py::none();
    std::string_view sv;
    if (!utf8_of(text, sv)) return py::str("undecided");
    uint32_t letters = 0;
    const Extracted st = extract_choices(sv, letters);
    if (st == Extracted::Undecided) return py::str("undecided");
    if (st == Extracted::None) return py::none();
    py::list out;
    for (int k = 0; k < 26; ++k)
        if (letters & (1u << k)) out.append(py::reinterpret_steal<py::object>(PyUnicode_FromOrdinal('A' + k)));
    return std::move(out);
}

py::object hkls_py(py::handle text) {
    if (!PyUnicode_Check(text.ptr())) return py::none();
    std::string_view sv;
    if (!utf8_of(text, sv)) return py::str("undecided");
    thread_local std::vector<Hkl> buf;
    const Extracted st = extract_hkls(sv, buf);
    if (st == Extracted::Undecided) return py::str("undecided");
    if (st == Extracted::None) return py::none();
    py::list out(buf.size());
    for (size_t x = 0; x < buf.size(); ++x) {
        py::tuple tup(buf[x].n);
        for (int k = 0; k < buf[x].n; ++k) tup[k] = py::int_(buf[x].idx[k]);
        out[x] = std::move(tup);
    }
    return std::move(out);
}

py::object extract_py(py::handle text, const std::string& kind) {
    if (kind == "mcq") return choices_py(text);
    if (kind == "hkl") return hkls_py(text);
    throw py::value_error("the compiled extractor knows the answer kinds mcq, hkl; got '" + kind + "'");
}

}  // namespace

void bind_extract(py::module_& m) {
    m.doc() = "Answer extraction (port of benchmint.metrics.extract): a result, None, or \"undecided\".";
    m.def("choices", &choices_py, py::arg("text"),
          "Sorted option letters, None, or \"undecided\" (then use the Python reference).");
    m.def("hkls", &hkls_py, py::arg("text"),
          "Sorted unique Miller-index tuples, None, or \"undecided\" (then use the Python reference).");
    m.def("extract", &extract_py, py::arg("text"), py::arg("kind"),
          "choices() or hkls() by answer-kind name (\"mcq\", \"hkl\").");
}

}  // namespace bm
