// _core.triage: page triage counts straight from PDF content streams, without
// running MuPDF's interpreter. Counts mirror what PyMuPDF reports:
//   paths  = len(page.get_drawings())   (fills, strokes, a stroke merged into
//            the identical fill just before it as one "fs" drawing)
//   images = len(page.get_image_info()) (image XObjects, inline images and
//            shadings, each placement once, skipped below 50% fill alpha)
// Form XObjects and tiling patterns are followed; a form already on the
// recursion stack counts nothing more. Malformed input never throws: the
// tokenizer reads what it can and reports `damaged`.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "parallel.hpp"

namespace py = pybind11;

namespace bm {
namespace {

using Matrix = std::array<double, 6>;
constexpr Matrix kIdentity{1, 0, 0, 1, 0, 0};
// MuPDF gives up on a content stream after this many syntax errors.
constexpr int kMaxSyntaxErrors = 100;
// MuPDF's own exception stack overflows at ~62 nested forms; stop a bit later.
constexpr int kMaxDepth = 64;

struct Resources;

// A Form XObject or a tiling pattern: its own content, run under `matrix`.
struct Program {
    std::string content;
    const Resources* res = nullptr;  // nullptr: inherit the caller's resources
    Matrix matrix = kIdentity;
};

enum class XKind { Image, Form, Hidden };
enum class PKind { Tiling, Shading };

struct XObject {
    XKind kind;
    const Program* form = nullptr;
};
struct Pattern {
    PKind kind;
    const Program* tiling = nullptr;
};
struct Alpha {
    double fill = 1, stroke = 1;
};

struct Resources {
    std::unordered_map<std::string, XObject> xobjects;
    std::unordered_map<std::string, Pattern> patterns;
    std::unordered_map<std::string, Alpha> extgstates;
    std::unordered_set<std::string> shadings, colorspaces, hidden;
    std::unordered_map<std::string, int64_t> fonts;  // name -> font xref (0: not a reference)
    std::unordered_set<std::string> actual_text;     // marked-content properties that carry /ActualText
};

// Owns everything converted from Python; resources and programs are shared
// (and may reference each other in cycles), so they are keyed by the Python
// object they came from.
struct Arena {
    std::vector<std::unique_ptr<Resources>> res;
    std::vector<std::unique_ptr<Program>> programs;
    std::unordered_map<PyObject*, const Resources*> res_seen;
    std::unordered_map<PyObject*, const Program*> prog_seen;

    static Matrix to_matrix(const py::handle& h) {
        Matrix m = kIdentity;
        if (h.is_none()) return m;
        auto seq = py::reinterpret_borrow<py::sequence>(h);
        if (py::len(seq) != 6) throw py::value_error("a matrix needs 6 numbers");
        for (int i = 0; i < 6; ++i) m[i] = seq[i].cast<double>();
        return m;
    }

    // ("form"|"tiling", bytes, resources or None, matrix or None)
    const Program* program(const py::handle& entry) {
        auto it = prog_seen.find(entry.ptr());
        if (it != prog_seen.end()) return it->second;
        auto t = py::reinterpret_borrow<py::tuple>(entry);
        if (t.size() != 4) throw py::value_error("a form or tiling entry is (kind, bytes, resources, matrix)");
        programs.push_back(std::make_unique<Program>());
        Program* p = programs.back().get();
        prog_seen[entry.ptr()] = p;  // before recursing: forms may invoke themselves
        p->content = t[1].cast<std::string>();
        p->matrix = to_matrix(t[3]);
        p->res = t[2].is_none() ? nullptr : resources(t[2]);
        return p;
    }

    const Resources* resources(const py::handle& h) {
        auto it = res_seen.find(h.ptr());
        if (it != res_seen.end()) return it->second;
        res.push_back(std::make_unique<Resources>());
        Resources* r = res.back().get();
        res_seen[h.ptr()] = r;
        auto d = py::reinterpret_borrow<py::dict>(h);
        if (d.contains("XObject"))
            for (auto kv : py::reinterpret_borrow<py::dict>(d["XObject"])) {
                auto t = py::reinterpret_borrow<py::tuple>(kv.second);
                auto kind = t[0].cast<std::string>();
                XObject x{kind == "image" ? XKind::Image : kind == "form" ? XKind::Form : XKind::Hidden};
                if (kind == "form")
                    x.form = program(kv.second);
                else if (kind != "image" && kind != "hidden")
                    throw py::value_error("XObject kind must be 'image', 'form' or 'hidden'");
                r->xobjects[kv.first.cast<std::string>()] = x;
            }
        if (d.contains("Pattern"))
            for (auto kv : py::reinterpret_borrow<py::dict>(d["Pattern"])) {
                auto t = py::reinterpret_borrow<py::tuple>(kv.second);
                auto kind = t[0].cast<std::string>();
                Pattern p{kind == "tiling" ? PKind::Tiling : PKind::Shading};
                if (kind == "tiling")
                    p.tiling = program(kv.second);
                else if (kind != "shading")
                    throw py::value_error("Pattern kind must be 'tiling' or 'shading'");
                r->patterns[kv.first.cast<std::string>()] = p;
            }
        if (d.contains("ExtGState"))
            for (auto kv : py::reinterpret_borrow<py::dict>(d["ExtGState"])) {
                auto t = py::reinterpret_borrow<py::sequence>(kv.second);
                r->extgstates[kv.first.cast<std::string>()] = Alpha{t[0].cast<double>(), t[1].cast<double>()};
            }
        auto names = [&](const char* key, std::unordered_set<std::string>& out) {
            if (d.contains(key))
                for (auto n : py::reinterpret_borrow<py::iterable>(d[key])) out.insert(n.cast<std::string>());
        };
        names("Shading", r->shadings);
        names("ColorSpace", r->colorspaces);
        names("Hidden", r->hidden);
        names("ActualText", r->actual_text);
        if (d.contains("Font"))
            for (auto kv : py::reinterpret_borrow<py::dict>(d["Font"]))
                r->fonts[kv.first.cast<std::string>()] = kv.second.cast<int64_t>();
        return r;
    }
};

struct Counts {
    int64_t images = 0, paths = 0;
    bool damaged = false;
};

// ---------------------------------------------------------------- lexer

enum class Tok { End, Number, Name, String, Array, Dict, Keyword, Bool, Error };

inline bool is_white(unsigned char c) { return c == 0 || c == 9 || c == 10 || c == 12 || c == 13 || c == 32; }
inline bool is_delim(unsigned char c) {
    return c == '(' || c == ')' || c == '<' || c == '>' || c == '[' || c == ']' || c == '{' || c == '}' || c == '/' ||
           c == '%';
}
inline bool is_regular(unsigned char c) { return !is_white(c) && !is_delim(c); }
inline int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

struct Lexer {
    const char* s;
    size_t n, i = 0;
    bool truncated = false;  // a string, array or dict ran into the end of the stream
    std::string text;        // decoded name, or keyword
    double num = 0;
    size_t start = 0;    // where the last token began (strings and arrays are read from there when needed)
    bool closed = true;  // the last string, array or dictionary ended with its delimiter

    Lexer(std::string_view v) : s(v.data()), n(v.size()) {}

    void skip_white() {
        while (i < n) {
            unsigned char c = s[i];
            if (is_white(c))
                ++i;
            else if (c == '%') {
                while (i < n && s[i] != '\n' && s[i] != '\r') ++i;
            } else
                break;
        }
    }

    void skip_literal_string() {  // after '('; nesting and backslash escapes
        int depth = 1;
        while (i < n) {
            char c = s[i++];
            if (c == '\\')
                ++i;
            else if (c == '(')
                ++depth;
            else if (c == ')' && --depth == 0) {
                closed = true;
                return;
            }
        }
        i = n;
        truncated = true;
        closed = false;
    }

    void skip_hex_string() {  // after '<'
        while (i < n && s[i] != '>') ++i;
        closed = i < n;
        if (i < n)
            ++i;
        else
            truncated = true;
    }

    void read_name() {  // after '/'; #xx escapes decoded
        text.clear();
        while (i < n && is_regular(s[i])) {
            if (s[i] == '#' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
                text.push_back(char(hexval(s[i + 1]) * 16 + hexval(s[i + 2])));
                i += 3;
            } else
                text.push_back(s[i++]);
        }
    }

    static double parse_number(const char* p, const char* e) {
        bool neg = false;
        while (p < e && (*p == '+' || *p == '-')) neg ^= (*p++ == '-');
        double v = 0;
        while (p < e && *p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0');
        if (p < e && *p == '.') {
            double scale = 0.1;
            for (++p; p < e && *p >= '0' && *p <= '9'; ++p, scale *= 0.1) v += (*p - '0') * scale;
        }
        return neg ? -v : v;
    }

    // Skips one nested array or dictionary body (opened already).
    void skip_compound(int depth) {
        while (depth > 0) {
            skip_white();
            if (i >= n) {
                truncated = true;
                closed = false;
                return;
            }
            char c = s[i++];
            if (c == '(')
                skip_literal_string();
            else if (c == '[')
                ++depth;
            else if (c == ']')
                --depth;
            else if (c == '<') {
                if (i < n && s[i] == '<')
                    ++i, ++depth;
                else
                    skip_hex_string();
            } else if (c == '>') {
                if (i < n && s[i] == '>') ++i, --depth;
            }
        }
        closed = true;
    }

    Tok next() {
        skip_white();
        start = i;
        if (i >= n) return Tok::End;
        unsigned char c = s[i];
        switch (c) {
            case '/':
                ++i;
                read_name();
                return Tok::Name;
            case '(':
                ++i;
                skip_literal_string();
                return Tok::String;
            case '<':
                ++i;
                if (i < n && s[i] == '<') {
                    ++i;
                    skip_compound(1);
                    return Tok::Dict;
                }
                skip_hex_string();
                return Tok::String;
            case '[':
                ++i;
                skip_compound(1);
                return Tok::Array;
            case ')':
            case '>':
            case ']':
            case '{':
            case '}':
                ++i;
                if (c == '>' && i < n && s[i] == '>') ++i;
                return Tok::Error;
            default:
                break;
        }
        size_t b = i;
        while (i < n && is_regular(s[i])) ++i;
        if ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.') {
            num = parse_number(s + b, s + i);
            return Tok::Number;
        }
        text.assign(s + b, i - b);
        if (text == "true" || text == "false" || text == "null") return Tok::Bool;
        return Tok::Keyword;
    }
};

// ---------------------------------------------------------------- inline images

// Inline image dictionary values needed to size unfiltered data.
struct InlineInfo {
    long w = -1, h = -1, bpc = 8, comps = 1;
    bool filtered = false, mask = false;
    std::string filter;
};

// Scans forward for "EI" between white space (or the end): the end of inline
// data whose length cannot be computed. The bytes after a candidate must look
// like content (no bytes >= 0x80 or control codes in the next 32), which
// rejects "EI" occurring inside binary data.
size_t find_ei(const char* s, size_t n, size_t from) {
    for (size_t i = from; i + 1 < n; ++i) {
        if (s[i] != 'E' || s[i + 1] != 'I') continue;
        if (i > from && !is_white(s[i - 1])) continue;
        if (i + 2 < n && !is_white(s[i + 2]) && !is_delim(s[i + 2])) continue;
        bool plausible = true;
        for (size_t k = i + 2; k < n && k < i + 34; ++k) {
            unsigned char c = s[k];
            if (c >= 0x80 || (c < 32 && !is_white(c))) {
                plausible = false;
                break;
            }
        }
        if (plausible) return i;
    }
    return std::string::npos;
}

// After the BI keyword: reads the dictionary, then skips the data and EI.
// Returns false when no end of the image could be found (the rest of the
// stream is then data).
bool skip_inline_image(Lexer& lx) {
    InlineInfo info;
    std::string key;
    bool have_key = false;
    for (;;) {
        Tok t = lx.next();
        if (t == Tok::End) return false;
        if (t == Tok::Keyword && lx.text == "ID") break;
        if (!have_key) {
            if (t == Tok::Name) key = lx.text, have_key = true;
            continue;
        }
        have_key = false;
        if (key == "W" || key == "Width")
            info.w = t == Tok::Number ? long(lx.num) : -1;
        else if (key == "H" || key == "Height")
            info.h = t == Tok::Number ? long(lx.num) : -1;
        else if (key == "BPC" || key == "BitsPerComponent")
            info.bpc = t == Tok::Number ? long(lx.num) : 8;
        else if (key == "IM" || key == "ImageMask")
            info.mask = t == Tok::Bool && lx.text == "true";
        else if (key == "F" || key == "Filter") {
            info.filtered = true;
            if (t == Tok::Name) info.filter = lx.text;
        } else if (key == "CS" || key == "ColorSpace") {
            if (t == Tok::Name) {
                const std::string& v = lx.text;
                info.comps = (v == "RGB" || v == "DeviceRGB" || v == "CalRGB") ? 3
                             : (v == "CMYK" || v == "DeviceCMYK")              ? 4
                                                                               : 1;
            } else
                info.comps = 1;  // indexed arrays hold one index per pixel
        }
    }
    const char* s = lx.s;
    size_t n = lx.n, data = lx.i + 1;  // one white-space byte follows ID
    if (data > n) return false;
    if (!info.filtered && info.w > 0 && info.h > 0 && info.bpc > 0) {
        long comps = info.mask ? 1 : info.comps, bpc = info.mask ? 1 : info.bpc;
        size_t len = size_t(info.h) * size_t((info.w * comps * bpc + 7) / 8);
        size_t j = data + len;
        while (j < n && is_white(s[j])) ++j;
        if (j + 2 <= n && s[j] == 'E' && s[j + 1] == 'I' && (j + 2 == n || !is_regular(s[j + 2]))) {
            lx.i = j + 2;
            return true;
        }
    }
    size_t from = data;
    // ASCII filters carry their own end-of-data marker before EI; without it
    // the data runs to the end of the stream.
    std::string_view rest(s + from, n - from);
    const bool ahx = info.filter == "AHx" || info.filter == "ASCIIHexDecode";
    const bool a85 = info.filter == "A85" || info.filter == "ASCII85Decode";
    size_t eod = ahx ? rest.find('>') : a85 ? rest.find("~>") : 0;
    size_t ei = eod == std::string_view::npos ? std::string::npos : find_ei(s, n, from + eod + (ahx ? 1 : a85 ? 2 : 0));
    if (ei == std::string::npos) {
        lx.i = n;
        return false;
    }
    lx.i = ei + 2;
    return true;
}

// ---------------------------------------------------------------- interpreter

enum class Paint { Color, Tiling, Shading, None };

struct Material {
    Paint kind = Paint::Color;
    const Program* tiling = nullptr;
};

struct GState {
    Matrix ctm = kIdentity;
    Alpha alpha;
    Material fill, stroke;
};

inline Matrix concat(const Matrix& m, const Matrix& ctm) {  // m x ctm
    return {m[0] * ctm[0] + m[1] * ctm[2],          m[0] * ctm[1] + m[1] * ctm[3],
            m[2] * ctm[0] + m[3] * ctm[2],          m[2] * ctm[1] + m[3] * ctm[3],
            m[4] * ctm[0] + m[5] * ctm[2] + ctm[4], m[4] * ctm[1] + m[5] * ctm[3] + ctm[5]};
}

inline uint32_t op_code(const std::string& k) {
    uint32_t v = 0;
    for (size_t j = 0; j < k.size() && j < 4; ++j) v = (v << 8) | uint8_t(k[j]);
    return k.size() > 4 ? 0xffffffffu : v;
}
constexpr uint32_t A(char a) { return uint8_t(a); }
constexpr uint32_t B(char a, char b) { return (uint32_t(uint8_t(a)) << 8) | uint8_t(b); }
constexpr uint32_t C(char a, char b, char c) { return (B(a, b) << 8) | uint8_t(c); }

bool known_keyword(uint32_t op) {
    switch (op) {
        case A('w'):
        case A('J'):
        case A('j'):
        case A('M'):
        case A('d'):
        case B('r', 'i'):
        case A('i'):
        case B('g', 's'):
        case A('q'):
        case A('Q'):
        case B('c', 'm'):
        case A('m'):
        case A('l'):
        case A('c'):
        case A('v'):
        case A('y'):
        case A('h'):
        case B('r', 'e'):
        case A('S'):
        case A('s'):
        case A('f'):
        case A('F'):
        case B('f', '*'):
        case A('B'):
        case B('B', '*'):
        case A('b'):
        case B('b', '*'):
        case A('n'):
        case A('W'):
        case B('W', '*'):
        case B('B', 'T'):
        case B('E', 'T'):
        case B('T', 'c'):
        case B('T', 'w'):
        case B('T', 'z'):
        case B('T', 'L'):
        case B('T', 'f'):
        case B('T', 'r'):
        case B('T', 's'):
        case B('T', 'd'):
        case B('T', 'D'):
        case B('T', 'm'):
        case B('T', '*'):
        case B('T', 'j'):
        case B('T', 'J'):
        case A('\''):
        case A('"'):
        case B('d', '0'):
        case B('d', '1'):
        case B('C', 'S'):
        case B('c', 's'):
        case B('S', 'C'):
        case C('S', 'C', 'N'):
        case B('s', 'c'):
        case C('s', 'c', 'n'):
        case A('G'):
        case A('g'):
        case B('R', 'G'):
        case B('r', 'g'):
        case A('K'):
        case A('k'):
        case B('s', 'h'):
        case B('B', 'I'):
        case B('I', 'D'):
        case B('E', 'I'):
        case B('D', 'o'):
        case B('M', 'P'):
        case B('D', 'P'):
        case C('B', 'M', 'C'):
        case C('B', 'D', 'C'):
        case C('E', 'M', 'C'):
        case B('B', 'X'):
        case B('E', 'X'):
            return true;
        default:
            return false;
    }
}

struct Interpreter {
    Counts out;
    // The last drawing appended: a stroke of the identical path right after
    // a fill is merged into it (PyMuPDF's "fs"), as B/b do.
    bool last_is_fill = false;
    Matrix last_ctm{};
    std::vector<double> last_geom;
    std::vector<const Program*> stack;  // forms and patterns being run

    static bool device_space(const std::string& n) {
        return n == "DeviceGray" || n == "DeviceRGB" || n == "DeviceCMYK" || n == "G" || n == "RGB" || n == "CMYK" ||
               n == "Pattern";
    }

    void run_program(const Program* p, const Resources* inherited, const GState& gs, int hidden) {
        for (const Program* q : stack)
            if (q == p) return;  // cycle: MuPDF skips the nested invocation
        if (int(stack.size()) >= kMaxDepth) {
            out.damaged = true;
            return;
        }
        GState inner = gs;
        inner.ctm = concat(p->matrix, gs.ctm);
        stack.push_back(p);
        run(p->content, p->res ? p->res : inherited, inner, hidden);
        stack.pop_back();
    }

    void image(const GState& gs, bool hidden) {
        // PyMuPDF's text-page device drops images painted below 50% alpha.
        if (!hidden && gs.alpha.fill >= 0.5) ++out.images;
    }

    void fill(const std::vector<double>& geom, const GState& gs, const Resources* res, int hidden) {
        switch (gs.fill.kind) {
            case Paint::Color:
                ++out.paths;
                last_is_fill = true;
                last_ctm = gs.ctm;
                last_geom = geom;
                break;
            case Paint::Shading:
                image(gs, hidden);
                break;
            case Paint::Tiling:
                run_program(gs.fill.tiling, res, gs, hidden);
                break;
            case Paint::None:
                break;
        }
    }

    void stroke(const std::vector<double>& geom, const GState& gs, const Resources* res, int hidden, bool quad) {
        switch (gs.stroke.kind) {
            case Paint::Color:
                if (last_is_fill && last_ctm == gs.ctm && last_geom == geom && !quad) {
                    last_is_fill = false;  // now "fs": a further stroke is a new drawing
                    break;
                }
                ++out.paths;
                last_is_fill = false;
                break;
            case Paint::Shading:
                if (!hidden && gs.alpha.stroke >= 0.5) ++out.images;
                break;
            case Paint::Tiling:
                run_program(gs.stroke.tiling, res, gs, hidden);
                break;
            case Paint::None:
                break;
        }
    }

    void run(std::string_view content, const Resources* res, GState gs, int hidden) {
        static const Resources empty;
        if (!res) res = &empty;
        Lexer lx(content);
        std::vector<GState> saved;
        std::vector<bool> marked;  // per open marked-content section: does it hide?
        std::vector<double> nums, geom;
        std::string name, tag;  // last and first name operands
        bool have_name = false, have_point = false, has_items = false;
        // The current point and the start of its subpath: "h" where they coincide adds no segment, so MuPDF
        // (and PyMuPDF's fill-then-stroke merge) sees the same path as without it.
        double cur_x = 0, cur_y = 0, sub_x = 0, sub_y = 0;
        // PyMuPDF turns four consecutive lines of a stroked path that end where they began into one "qu" item,
        // but not those of a filled path: a fill and a stroke of such a path then differ and are not merged.
        int line_run = 0;
        double run_x = 0, run_y = 0;
        bool has_quad = false;
        int errors = 0;
        auto error = [&] {
            out.damaged = true;
            ++errors;
        };
        auto clear_operands = [&] {
            nums.clear();
            have_name = false;
        };
        auto end_path = [&] {
            geom.clear();
            have_point = has_items = has_quad = false;
            line_run = 0;
        };
        auto push_geom = [&](double op, size_t k) {
            geom.push_back(op);
            for (size_t j = 0; j < k; ++j) geom.push_back(j < nums.size() ? nums[nums.size() - k + j] : 0.0);
            size_t n = geom.size();
            double px = cur_x, py = cur_y;
            if (op == 6) {  // re: the rectangle's corner starts and ends its closed subpath
                cur_x = sub_x = geom[n - 4], cur_y = sub_y = geom[n - 3];
            } else {
                cur_x = geom[n - 2], cur_y = geom[n - 1];
                if (op == 1) sub_x = cur_x, sub_y = cur_y;
            }
            if (op != 2) {  // a move, a curve or a rectangle ends a run of lines
                line_run = 0;
                return;
            }
            if (line_run == 0) run_x = px, run_y = py;
            if (++line_run == 4 && cur_x == run_x && cur_y == run_y) has_quad = true, line_run = 0;
        };
        auto set_material = [&](Material& m) {  // scn/SCN with a pattern name
            if (!have_name) return;
            auto it = res->patterns.find(name);
            if (it == res->patterns.end()) {
                error();
                m = Material{Paint::None, nullptr};
            } else if (it->second.kind == PKind::Shading)
                m = Material{Paint::Shading, nullptr};
            else
                m = Material{Paint::Tiling, it->second.tiling};
        };
        auto set_space = [&](Material& m) {
            if (!have_name) return;
            if (name == "Pattern")
                m = Material{Paint::None, nullptr};
            else {
                if (!device_space(name) && !res->colorspaces.count(name)) error();
                m = Material{};
            }
        };

        while (errors < kMaxSyntaxErrors) {
            Tok t = lx.next();
            if (t == Tok::End) break;
            switch (t) {
                case Tok::Number:
                    nums.push_back(lx.num);
                    continue;
                case Tok::Name:
                    name = lx.text;
                    if (!have_name) tag = name;
                    have_name = true;
                    continue;
                case Tok::String:
                case Tok::Array:
                case Tok::Dict:
                case Tok::Bool:
                    continue;
                case Tok::Error:
                    error();
                    continue;
                default:
                    break;
            }
            const uint32_t op = op_code(lx.text);
            if (!known_keyword(op)) {
                error();
                clear_operands();
                continue;
            }
            bool paint_fill = false, paint_stroke = false, paint = false;
            switch (op) {
                case A('m'):
                    push_geom(1, 2);
                    have_point = true;
                    break;
                case A('l'):
                    if (have_point) push_geom(2, 2), has_items = true;
                    break;
                case A('c'):
                    if (have_point) push_geom(3, 6), has_items = true;
                    break;
                case A('v'):
                    if (have_point) push_geom(4, 4), has_items = true;
                    break;
                case A('y'):
                    if (have_point) push_geom(5, 4), has_items = true;
                    break;
                case B('r', 'e'):
                    push_geom(6, 4);
                    have_point = has_items = true;
                    break;
                case A('h'):
                    if (cur_x != sub_x || cur_y != sub_y) geom.push_back(7);
                    cur_x = sub_x, cur_y = sub_y;
                    line_run = 0;
                    break;
                case A('S'):
                case A('s'):
                    paint = paint_stroke = true;
                    break;
                case A('f'):
                case A('F'):
                case B('f', '*'):
                    paint = paint_fill = true;
                    break;
                case A('B'):
                case B('B', '*'):
                case A('b'):
                case B('b', '*'):
                    paint = paint_fill = paint_stroke = true;
                    break;
                case A('n'):
                    paint = true;
                    break;
                case A('q'):
                    saved.push_back(gs);
                    break;
                case A('Q'):
                    if (!saved.empty()) gs = saved.back(), saved.pop_back();
                    break;
                case B('c', 'm'):
                    if (nums.size() < 6)
                        error();
                    else
                        gs.ctm = concat({nums[nums.size() - 6], nums[nums.size() - 5], nums[nums.size() - 4],
                                         nums[nums.size() - 3], nums[nums.size() - 2], nums[nums.size() - 1]},
                                        gs.ctm);
                    break;
                case B('g', 's'):
                    if (have_name) {
                        auto it = res->extgstates.find(name);
                        if (it == res->extgstates.end())
                            error();
                        else
                            gs.alpha = it->second;
                    }
                    break;
                case B('c', 's'):
                    set_space(gs.fill);
                    break;
                case B('C', 'S'):
                    set_space(gs.stroke);
                    break;
                case C('s', 'c', 'n'):
                    set_material(gs.fill);
                    break;
                case C('S', 'C', 'N'):
                    set_material(gs.stroke);
                    break;
                case A('g'):
                case B('r', 'g'):
                case A('k'):
                    gs.fill = Material{};
                    break;
                case A('G'):
                case B('R', 'G'):
                case A('K'):
                    gs.stroke = Material{};
                    break;
                case B('s', 'h'):
                    if (have_name) {
                        if (!res->shadings.count(name))
                            error();
                        else
                            image(gs, hidden);
                    }
                    break;
                case B('D', 'o'): {
                    if (!have_name) break;
                    auto it = res->xobjects.find(name);
                    if (it == res->xobjects.end()) {
                        error();
                        break;
                    }
                    if (it->second.kind == XKind::Image)
                        image(gs, hidden);
                    else if (it->second.kind == XKind::Form && !hidden)
                        run_program(it->second.form, res, gs, 0);
                    break;
                }
                case B('B', 'I'):
                    if (skip_inline_image(lx))
                        image(gs, hidden);
                    else
                        error();
                    break;
                case C('B', 'D', 'C'):
                case C('B', 'M', 'C'): {
                    // "/OC /name BDC" hides when the named optional content is off.
                    bool hides = op == C('B', 'D', 'C') && tag == "OC" && have_name && res->hidden.count(name) > 0;
                    marked.push_back(hides);
                    hidden += hides;
                    break;
                }
                case C('E', 'M', 'C'):
                    if (!marked.empty()) hidden -= marked.back(), marked.pop_back();
                    break;
                default:
                    break;  // text, colour values, line style: no effect on the counts
            }
            if (paint) {
                if (has_items && !hidden) {
                    if (paint_fill) fill(geom, gs, res, hidden);
                    if (paint_stroke) stroke(geom, gs, res, hidden, has_quad);
                }
                end_path();
            }
            clear_operands();
        }
        // Strings, arrays or dictionaries cut off by the end of the stream.
        if (lx.truncated) out.damaged = true;
    }
};

// ---------------------------------------------------------------- figure words

// Character classes of font codes, as benchmint/pdf/fonts.py gives them.
enum : uint8_t { kOther = 0, kF = 1, kILower = 2, kGLower = 3, kIUpper = 4, kGUpper = 5, kAny = 6 };

struct Font {
    int code_bytes = 0;                   // 1 or 2; 0: codes of unknown length (any text may read as anything)
    uint8_t fallback = kAny;              // class of codes missing below
    std::array<std::string, 256> narrow;  // one-byte codes: classes ("" = fallback)
    std::unordered_map<uint32_t, std::string> wide;
};
using Fonts = std::unordered_map<int64_t, Font>;

Fonts to_fonts(const py::dict& d) {
    Fonts out;
    for (auto kv : d) {
        auto t = py::reinterpret_borrow<py::tuple>(kv.second);
        if (t.size() != 3) throw py::value_error("a font is (code bytes, default class, {code: classes})");
        Font& f = out[kv.first.cast<int64_t>()];
        f.code_bytes = t[0].cast<int>();
        f.fallback = t[1].cast<uint8_t>();
        if (f.code_bytes < 0 || f.code_bytes > 2) throw py::value_error("fonts have 0, 1 or 2 code bytes");
        for (auto e : py::reinterpret_borrow<py::dict>(t[2])) {
            const auto code = e.first.cast<uint32_t>();
            auto cls = e.second.cast<std::string>();
            if (f.code_bytes == 1 && code < 256)
                f.narrow[code] = std::move(cls);
            else if (f.code_bytes == 2)
                f.wide[code] = std::move(cls);
        }
    }
    return out;
}

// The bytes a string token stands for: literal strings with their escapes
// (an end of line inside reads as one \n), hex strings with white space
// skipped and an odd digit padded with 0.
std::string string_bytes(const Lexer& lx) {
    std::string out;
    const char* s = lx.s;
    const size_t e = lx.closed ? lx.i - 1 : lx.i;
    if (s[lx.start] == '<') {
        int hi = -1;
        for (size_t i = lx.start + 1; i < e; ++i) {
            const int v = hexval(s[i]);
            if (v < 0) continue;
            if (hi < 0)
                hi = v;
            else
                out.push_back(char(hi * 16 + v)), hi = -1;
        }
        if (hi >= 0) out.push_back(char(hi * 16));
        return out;
    }
    for (size_t i = lx.start + 1; i < e; ++i) {
        const char c = s[i];
        if (c == '\r') {
            out.push_back('\n');
            if (i + 1 < e && s[i + 1] == '\n') ++i;
            continue;
        }
        if (c != '\\') {
            out.push_back(c);
            continue;
        }
        if (++i >= e) break;
        const char d = s[i];
        switch (d) {
            case 'n':
                out.push_back('\n');
                break;
            case 'r':
                out.push_back('\r');
                break;
            case 't':
                out.push_back('\t');
                break;
            case 'b':
                out.push_back('\b');
                break;
            case 'f':
                out.push_back('\f');
                break;
            case '\r':  // a backslash before an end of line joins the lines
                if (i + 1 < e && s[i + 1] == '\n') ++i;
                break;
            case '\n':
                break;
            default:
                if (d >= '0' && d <= '7') {
                    int v = d - '0';
                    for (int k = 0; k < 2 && i + 1 < e && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k)
                        v = v * 8 + (s[++i] - '0');
                    out.push_back(char(v & 0xff));
                } else
                    out.push_back(d);
        }
    }
    return out;
}

// Whether a content stream may show "Fig" or "FIG": its shown characters are
// read in stream order (MuPDF appends a text line's characters in the order
// they are shown), through each font's code classes. Unknown fonts, unknown
// code lengths, /ActualText, nesting too deep and damaged streams (MuPDF's
// error limit) all answer "may".
struct FigureWordScan {
    const Fonts& fonts;
    std::vector<const Program*> stack;
    uint8_t p2 = kOther, p1 = kOther;  // the two classes before
    bool found = false;

    explicit FigureWordScan(const Fonts& f) : fonts(f) {}

    void feed(uint8_t c) {
        // A letter repeated may be a duplicate glyph (fake bold) that MuPDF drops.
        if (c == p1 && c != kOther && c != kAny) return;
        const bool f = p2 == kF || p2 == kAny;
        if (f && (((p1 == kILower || p1 == kAny) && (c == kGLower || c == kAny)) ||
                  ((p1 == kIUpper || p1 == kAny) && (c == kGUpper || c == kAny))))
            found = true;
        p2 = p1;
        p1 = c;
    }

    void show(const std::string& bytes, const Font* font) {
        if (bytes.empty()) return;
        if (!font || font->code_bytes == 0) {
            found = true;
            return;
        }
        auto classes = [&](const std::string* cls) {
            if (!cls || cls->empty())
                feed(font->fallback);
            else
                for (char c : *cls) feed(uint8_t(c));
        };
        if (font->code_bytes == 1) {
            for (unsigned char b : bytes) classes(&font->narrow[b]);
            return;
        }
        size_t i = 0;
        for (; i + 1 < bytes.size(); i += 2) {
            const uint32_t code = (uint32_t(uint8_t(bytes[i])) << 8) | uint8_t(bytes[i + 1]);
            auto it = font->wide.find(code);
            classes(it == font->wide.end() ? nullptr : &it->second);
        }
        if (i < bytes.size()) feed(kAny);  // a code cut short
    }

    const Font* font_named(const Resources* res, const std::string& name) const {
        auto it = res->fonts.find(name);
        if (it == res->fonts.end()) return nullptr;
        auto f = fonts.find(it->second);
        return f == fonts.end() ? nullptr : &f->second;
    }

    void run_program(const Program* p, const Resources* inherited, const Font* font) {
        for (const Program* q : stack)
            if (q == p) return;  // a cycle: MuPDF skips the nested invocation
        if (int(stack.size()) >= kMaxDepth) {
            found = true;
            return;
        }
        stack.push_back(p);
        run(p->content, p->res ? p->res : inherited, font);
        stack.pop_back();
    }

    void run(std::string_view content, const Resources* res, const Font* font) {
        static const Resources empty;
        if (!res) res = &empty;
        Lexer lx(content);
        std::vector<const Font*> saved;
        std::string name, shown;
        bool have_name = false, have_string = false, actual_text = false;
        size_t array_at = 0, array_end = 0;
        bool have_array = false, array_closed = true;
        int errors = 0;
        auto clear = [&] { have_name = have_string = have_array = actual_text = false; };
        while (!found) {
            const Tok t = lx.next();
            if (t == Tok::End) break;
            switch (t) {
                case Tok::Name:
                    name = lx.text;
                    have_name = true;
                    continue;
                case Tok::String:
                    shown = string_bytes(lx);
                    have_string = true;
                    continue;
                case Tok::Array:
                    array_at = lx.start, array_end = lx.i, array_closed = lx.closed;
                    have_array = true;
                    continue;
                case Tok::Dict: {
                    // Marked content whose /ActualText MuPDF shows in place of the glyphs (a # may spell it).
                    std::string_view d(lx.s + lx.start, lx.i - lx.start);
                    if (d.find("ActualText") != std::string_view::npos || d.find('#') != std::string_view::npos)
                        actual_text = true;
                    continue;
                }
                case Tok::Number:
                case Tok::Bool:
                    continue;
                case Tok::Error:
                    if (++errors >= kMaxSyntaxErrors) found = true;
                    continue;
                default:
                    break;
            }
            const uint32_t op = op_code(lx.text);
            if (!known_keyword(op)) {
                if (++errors >= kMaxSyntaxErrors) found = true;
                clear();
                continue;
            }
            switch (op) {
                case A('q'):
                    saved.push_back(font);
                    break;
                case A('Q'):
                    if (!saved.empty()) font = saved.back(), saved.pop_back();
                    break;
                case B('T', 'f'):
                    font = have_name ? font_named(res, name) : nullptr;
                    break;
                case B('T', 'j'):
                case A('\''):
                case A('"'):
                    if (have_string) show(shown, font);
                    break;
                case B('T', 'J'):
                    if (have_array) {
                        Lexer items(
                            std::string_view(lx.s + array_at + 1, array_end - array_at - (array_closed ? 2 : 1)));
                        for (Tok it = items.next(); it != Tok::End && !found; it = items.next())
                            if (it == Tok::String) show(string_bytes(items), font);
                    }
                    break;
                case B('D', 'o'):
                    if (have_name) {
                        auto it = res->xobjects.find(name);
                        if (it != res->xobjects.end() && it->second.kind == XKind::Form)
                            run_program(it->second.form, res, font);
                    }
                    break;
                case C('s', 'c', 'n'):
                case C('S', 'C', 'N'):
                    if (have_name) {  // a tiling pattern's cells may show text
                        auto it = res->patterns.find(name);
                        if (it != res->patterns.end() && it->second.kind == PKind::Tiling)
                            run_program(it->second.tiling, res, font);
                    }
                    break;
                case C('B', 'D', 'C'):
                    if (actual_text || (have_name && res->actual_text.count(name))) found = true;
                    break;
                case B('B', 'I'):
                    skip_inline_image(lx);
                    break;
                default:
                    break;
            }
            clear();
        }
    }
};

Counts count_one(std::string_view content, const Resources* res) {
    Interpreter it;
    it.run(content, res, GState{}, 0);
    return it.out;
}

py::tuple py_count_paths(const py::bytes& content, const py::object& resources) {
    Arena arena;
    const Resources* res = resources.is_none() ? nullptr : arena.resources(resources);
    std::string_view view = content;
    Counts c;
    {
        py::gil_scoped_release release;
        c = count_one(view, res);
    }
    return py::make_tuple(c.images, c.paths, c.damaged);
}

// A batch of (content, resources) pages converted from Python; the content bytes stay alive (and are not
// copied) while the GIL is released.
struct PageBatch {
    Arena arena;
    std::vector<py::bytes> keep;
    std::vector<std::string_view> contents;
    std::vector<const Resources*> res;

    explicit PageBatch(const py::list& pages) {
        const auto n = static_cast<size_t>(py::len(pages));
        keep.reserve(n);
        for (size_t i = 0; i < n; ++i) {
            auto t = py::reinterpret_borrow<py::sequence>(pages[i]);
            if (py::len(t) != 2) throw py::value_error("each page is (content bytes, resources)");
            keep.push_back(t[0].cast<py::bytes>());
            contents.emplace_back(keep.back());
            res.push_back(t[1].is_none() ? nullptr : arena.resources(t[1]));
        }
    }
    int64_t size() const { return static_cast<int64_t>(contents.size()); }
};

// Plain Python results (per-page values the caller reads one by one): a triage worker never imports NumPy.
py::list py_count_pages(const py::list& pages, int workers) {
    const int nworkers = resolve_workers(workers);
    const PageBatch batch(pages);
    const int64_t n = batch.size();
    std::vector<Counts> counts(static_cast<size_t>(n));
    {
        py::gil_scoped_release release;
        parallel_blocks(n, nworkers, 1, [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) counts[i] = count_one(batch.contents[i], batch.res[i]);
        });
    }
    py::list out(n);
    for (int64_t i = 0; i < n; ++i) out[i] = py::make_tuple(counts[i].images, counts[i].paths, counts[i].damaged);
    return out;
}

py::list py_figure_words(const py::list& pages, const py::dict& fonts, int workers) {
    const int nworkers = resolve_workers(workers);
    const PageBatch batch(pages);
    const Fonts table = to_fonts(fonts);
    const int64_t n = batch.size();
    std::vector<char> found(static_cast<size_t>(n));
    {
        py::gil_scoped_release release;
        parallel_blocks(n, nworkers, 1, [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) {
                FigureWordScan scan(table);
                scan.run(batch.contents[i], batch.res[i], nullptr);
                found[i] = scan.found;
            }
        });
    }
    py::list out(n);
    for (int64_t i = 0; i < n; ++i) out[i] = py::bool_(found[i] != 0);
    return out;
}

// The content with every `/Name Do` whose name is in `names` cut out (this
// stream only, not the forms it runs). Each cut leaves one space so the
// neighbouring tokens stay apart; inline image data is skipped, never cut.
py::tuple py_drop_invocations(const py::bytes& content, const std::vector<std::string>& names) {
    std::string_view v = content;
    const std::unordered_set<std::string> drop(names.begin(), names.end());
    std::string out;
    int64_t dropped = 0;
    {
        py::gil_scoped_release release;
        out.reserve(v.size());
        Lexer lx(v);
        size_t copied = 0, name_at = 0;
        bool name_before = false;  // the previous token was a name in `drop`
        for (;;) {
            lx.skip_white();
            const size_t at = lx.i;
            Tok t = lx.next();
            if (t == Tok::End) break;
            if (t == Tok::Name) {
                name_before = drop.count(lx.text) > 0;
                name_at = at;
                continue;
            }
            if (t == Tok::Keyword && name_before && lx.text == "Do") {
                out.append(v.substr(copied, name_at - copied));
                out.push_back(' ');
                copied = lx.i;
                ++dropped;
            } else if (t == Tok::Keyword && lx.text == "BI" && !skip_inline_image(lx)) {
                break;  // the rest of the stream is image data
            }
            name_before = false;
        }
        out.append(v.substr(copied));
    }
    return py::make_tuple(py::bytes(out), dropped);
}

}  // namespace

void bind_triage(py::module_& m) {
    m.doc() = "Page triage counts (painted paths, image placements) from PDF content streams.";
    m.def("count_paths", &py_count_paths, py::arg("content"), py::arg("resources") = py::none(),
          "(images, paths, damaged) of one content stream. resources: dict with optional keys "
          "'XObject' {name: ('image',) | ('hidden',) | ('form', bytes, resources|None, matrix|None)}, "
          "'Pattern' {name: ('shading',) | ('tiling', bytes, resources|None, matrix|None)}, "
          "'ExtGState' {name: (fill alpha, stroke alpha)}, and name lists 'Shading', 'ColorSpace', "
          "'Hidden' (optional-content properties that are off). A form with resources None "
          "inherits its caller's.");
    m.def("count_pages", &py_count_pages, py::arg("pages"), py::arg("workers") = 1,
          "Batch of (content, resources) pairs -> [(images, paths, damaged)] per page. "
          "The GIL is released while counting; workers=-1 uses all cores.");
    m.def("figure_words", &py_figure_words, py::arg("pages"), py::arg("fonts"), py::arg("workers") = 1,
          "For each (content, resources) page, a bool: whether its shown text may read 'Fig' or 'FIG' (False proves "
          "it cannot). Resources as for count_pages, plus 'Font' {name: font xref} and 'ActualText' (property "
          "names); fonts: {xref: (code bytes 0|1|2, default class, {code: class bytes})}, classes as in "
          "benchmint.pdf.fonts.");
    m.def("drop_invocations", &py_drop_invocations, py::arg("content"), py::arg("names"),
          "(content, dropped): the content stream with each `/Name Do` of the given XObject names "
          "removed (this stream only; inline image data is never touched).");
}

}  // namespace bm
