#include "text/chat_template.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/text.h"

namespace switchyard::text {

using Json = nlohmann::ordered_json;

namespace {

// ---- values ---------------------------------------------------------------------------------

// A Jinja value: JSON data, an undefined name, or a namespace() (a mutable object every copy shares).
struct Value {
  Json json;
  bool undefined = false;
  std::shared_ptr<Json> ns;

  static Value of(Json j) {
    Value v;
    v.json = std::move(j);
    return v;
  }
  static Value missing() {
    Value v;
    v.undefined = true;
    return v;
  }
  const Json& data() const { return ns ? *ns : json; }
};

bool truthy(const Value& v) {
  if (v.undefined) return false;
  if (v.ns) return true;
  const Json& j = v.json;
  switch (j.type()) {
    case Json::value_t::null: return false;
    case Json::value_t::boolean: return j.get<bool>();
    case Json::value_t::number_integer: case Json::value_t::number_unsigned: return j.get<std::int64_t>() != 0;
    case Json::value_t::number_float: return j.get<double>() != 0;
    case Json::value_t::string: return !j.get_ref<const std::string&>().empty();
    case Json::value_t::array: case Json::value_t::object: return !j.empty();
    default: return false;
  }
}

const char* type_name(const Value& v) {
  if (v.undefined) return "undefined";
  if (v.ns) return "namespace";
  switch (v.json.type()) {
    case Json::value_t::null: return "none";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::string: return "string";
    case Json::value_t::array: return "list";
    case Json::value_t::object: return "dict";
    default: return "number";
  }
}

// Python's repr of a float, as Jinja prints it (shortest round trip, ".0" on integers).
std::string float_text(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  for (int precision = 1; precision <= 17; ++precision) {
    std::ostringstream s;
    s.precision(precision);
    s << x;
    if (std::stod(s.str()) == x) {
      std::string t = s.str();
      if (t.find_first_of(".en") == std::string::npos) t += ".0";
      return t;
    }
  }
  return std::to_string(x);
}

std::string python_repr(const Json& j);

std::string python_str(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return "None";
    case Json::value_t::boolean: return j.get<bool>() ? "True" : "False";
    case Json::value_t::string: return j.get<std::string>();
    case Json::value_t::number_float: return float_text(j.get<double>());
    case Json::value_t::number_integer: case Json::value_t::number_unsigned: return j.dump();
    default: return python_repr(j);
  }
}

std::string python_repr(const Json& j) {
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    const char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
    std::string out(1, quote);
    for (char c : s) {
      if (c == quote || c == '\\') out += '\\';
      if (c == '\n') out += "\\n";
      else if (c == '\t') out += "\\t";
      else out += c;
    }
    return out + quote;
  }
  if (j.is_array()) {
    std::string out = "[";
    for (std::size_t i = 0; i < j.size(); ++i) out += (i ? ", " : "") + python_repr(j[i]);
    return out + "]";
  }
  if (j.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, v] : j.items()) {
      out += (first ? "" : ", ") + python_repr(Json(k)) + ": " + python_repr(v);
      first = false;
    }
    return out + "}";
  }
  return python_str(j);
}

// Python's json.dumps(x, ensure_ascii=False) (transformers' tojson): ", " and ": " separators,
// keys in their order.
std::string python_json(const Json& j, int indent = -1, int depth = 0) {
  const std::string pad = indent >= 0 ? "\n" + std::string(static_cast<std::size_t>(indent * (depth + 1)), ' ') : "";
  const std::string close = indent >= 0 ? "\n" + std::string(static_cast<std::size_t>(indent * depth), ' ') : "";
  const char* comma = indent >= 0 ? "," : ", ";
  if (j.is_array()) {
    if (j.empty()) return "[]";
    std::string out = "[";
    for (std::size_t i = 0; i < j.size(); ++i) out += (i ? comma : "") + pad + python_json(j[i], indent, depth + 1);
    return out + close + "]";
  }
  if (j.is_object()) {
    if (j.empty()) return "{}";
    std::string out = "{";
    bool first = true;
    for (const auto& [k, v] : j.items()) {
      out += (first ? "" : comma) + pad + Json(k).dump(-1, ' ', false) + ": " + python_json(v, indent, depth + 1);
      first = false;
    }
    return out + close + "}";
  }
  if (j.is_number_float()) return float_text(j.get<double>());
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// ---- the program ------------------------------------------------------------------------------

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind { literal, name, attribute, subscript, slice, call, filter, test, unary, binary, list, dict, conditional };
  Kind kind;
  int line = 0;
  Json literal;
  std::string name;                 // name, attribute, filter, test, operator
  std::vector<ExprPtr> args;        // operands, call and filter arguments, list items, dict keys and values
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;             // `is not`
  bool has[3] = {false, false, false};  // slice parts present
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind { text, output, if_, for_, set, break_, continue_ };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;                               // output, set value, for iterable
  std::vector<std::pair<ExprPtr, Body>> branches;  // if / elif: condition and body
  Body body, else_body;                       // for, if's else
  std::vector<std::string> targets;           // for's names; set: name, or namespace and attribute
};

}  // namespace

struct TemplateProgram {
  std::string name;
  Body body;
};

namespace {

[[noreturn]] void fail(const std::string& name, int line, const std::string& what) {
  throw InputError(name + ", line " + std::to_string(line) + ": " + what, kExitBadContent);
}

// Bounds on what a template may do: nesting (the parser and the renderer recurse), loop
// iterations and output, so that a hostile template is an error, not a crash or a hang.
constexpr int kMaxNesting = 200;
constexpr std::int64_t kMaxIterations = 200'000;
constexpr std::size_t kMaxOutputBytes = std::size_t{16} << 20;
constexpr std::size_t kMaxWorkBytes = std::size_t{256} << 20;  // bytes of strings built, all told

// ---- lexing -------------------------------------------------------------------------------------

struct Piece {  // text, or the inside of a tag
  enum class Kind { text, output, statement } kind;
  std::string content;
  int line;
};

std::vector<Piece> split_pieces(std::string_view s, const std::string& name) {
  std::vector<Piece> pieces;
  std::size_t at = 0;
  int line = 1;
  bool strip_next = false, trim_newline = false;
  auto count_lines = [](std::string_view t) { return static_cast<int>(std::count(t.begin(), t.end(), '\n')); };
  while (at <= s.size()) {
    const std::size_t open = s.find('{', at);
    std::size_t tag = std::string_view::npos;
    for (std::size_t p = open; p != std::string_view::npos && p + 1 < s.size(); p = s.find('{', p + 1))
      if (s[p + 1] == '{' || s[p + 1] == '%' || s[p + 1] == '#') {
        tag = p;
        break;
      }
    const std::string_view raw = s.substr(at, tag == std::string_view::npos ? std::string_view::npos : tag - at);
    std::string text(raw);
    const int text_line = line;
    line += count_lines(raw);
    if (trim_newline && !text.empty() && text[0] == '\n') text.erase(0, 1);  // trim_blocks
    if (strip_next) text.erase(0, std::min(text.size(), text.find_first_not_of(" \t\r\n")));
    strip_next = trim_newline = false;
    if (tag == std::string_view::npos) {
      if (!text.empty()) pieces.push_back({Piece::Kind::text, text, text_line});
      break;
    }
    const char type = s[tag + 1];
    const bool block = type == '%' || type == '#';
    std::size_t inner = tag + 2;
    const bool minus_before = inner < s.size() && s[inner] == '-';
    const bool plus_before = inner < s.size() && s[inner] == '+';
    if (minus_before || plus_before) ++inner;
    if (minus_before) {
      const std::size_t keep = text.find_last_not_of(" \t\r\n");
      text.erase(keep == std::string::npos ? 0 : keep + 1);
    } else if (block && !plus_before) {
      // lstrip_blocks: the spaces and tabs before a block tag that is the first thing on its line
      // (in the source: after a newline, or at the template's start).
      const std::size_t nl = raw.rfind('\n');
      const std::string_view before = raw.substr(nl == std::string_view::npos ? 0 : nl + 1);
      const bool line_start = nl != std::string_view::npos || at == 0;
      if (line_start && before.find_first_not_of(" \t") == std::string_view::npos)
        text.erase(text.size() - std::min(text.size(), before.size()));
    }
    if (!text.empty()) pieces.push_back({Piece::Kind::text, text, text_line});
    const std::string closing = type == '{' ? "}}" : type == '%' ? "%}" : "#}";
    // The tag ends at its closing marker outside string literals.
    std::size_t end = inner;
    char quote = 0;
    for (; end + 1 < s.size(); ++end) {
      const char c = s[end];
      if (type != '#') {
        if (quote) {
          if (c == '\\') ++end;
          else if (c == quote) quote = 0;
          continue;
        }
        if (c == '\'' || c == '"') {
          quote = c;
          continue;
        }
      }
      if (s.compare(end, 2, closing) == 0) break;
    }
    if (end + 1 >= s.size()) fail(name, line, std::string("a tag opened with {") + type + " is not closed");
    std::size_t content_end = end;
    const bool minus_after = content_end > inner && s[content_end - 1] == '-';
    if (minus_after) --content_end;
    const std::string content(s.substr(inner, content_end - inner));
    if (type != '#') pieces.push_back({type == '{' ? Piece::Kind::output : Piece::Kind::statement, content, line});
    line += count_lines(content);
    at = end + 2;
    strip_next = minus_after;
    trim_newline = block && !minus_after;
    if (at >= s.size()) break;
  }
  return pieces;
}

struct Token {
  enum class Kind { name, number, string, op, end } kind;
  std::string text;
  Json value;
};

std::vector<Token> lex_expression(std::string_view s, const std::string& name, int line) {
  std::vector<Token> tokens;
  std::size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      tokens.push_back({Token::Kind::name, std::string(s.substr(i, j - i)), {}});
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      std::size_t j = i;
      bool is_float = false;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '.' || s[j] == '_')) {
        if (s[j] == '.') {
          if (j + 1 >= s.size() || !std::isdigit(static_cast<unsigned char>(s[j + 1]))) break;
          is_float = true;
        }
        ++j;
      }
      std::string digits(s.substr(i, j - i));
      digits.erase(std::remove(digits.begin(), digits.end(), '_'), digits.end());
      Json value;
      if (is_float) {
        value = std::strtod(digits.c_str(), nullptr);  // exact decimal digits; huge ones become inf
      } else {
        std::int64_t n = 0;
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
        if (ec != std::errc() || end != digits.data() + digits.size()) fail(name, line, "the number " + digits.substr(0, 40) + " is out of range");
        value = n;
      }
      tokens.push_back({Token::Kind::number, digits, std::move(value)});
      i = j;
      continue;
    }
    if (c == '\'' || c == '"') {
      std::string value;
      std::size_t j = i + 1;
      for (; j < s.size() && s[j] != c; ++j) {
        if (s[j] != '\\' || j + 1 >= s.size()) {
          value += s[j];
          continue;
        }
        const char e = s[++j];
        switch (e) {
          case 'n': value += '\n'; break;
          case 't': value += '\t'; break;
          case 'r': value += '\r'; break;
          case '\\': value += '\\'; break;
          case '\'': value += '\''; break;
          case '"': value += '"'; break;
          case '\n': break;
          default: value += '\\'; value += e;
        }
      }
      if (j >= s.size()) fail(name, line, "a string literal is not closed");
      tokens.push_back({Token::Kind::string, "", Json(value)});
      i = j + 1;
      continue;
    }
    static const char* const ops[] = {"//", "**", "==", "!=", "<=", ">=", "(", ")", "[", "]", "{", "}", ".", ",", ":",
                                      "|", "+", "-", "*", "/", "%", "~", "<", ">", "="};
    bool matched = false;
    for (const char* op : ops) {
      const std::size_t n = std::char_traits<char>::length(op);
      if (s.compare(i, n, op) == 0) {
        tokens.push_back({Token::Kind::op, op, {}});
        i += n;
        matched = true;
        break;
      }
    }
    if (!matched) fail(name, line, std::string("the character '") + c + "' is not part of the supported expressions");
  }
  tokens.push_back({Token::Kind::end, "", {}});
  return tokens;
}

// ---- parsing ------------------------------------------------------------------------------------

class ExprParser {
 public:
  ExprParser(std::vector<Token> tokens, const std::string& name, int line) : t_(std::move(tokens)), name_(name), line_(line) {}

  ExprPtr expression() {
    // Nesting is bounded so that a hostile template cannot exhaust the stack.
    if (++depth_ > kMaxNesting) error("expressions nested deeper than " + std::to_string(kMaxNesting));
    ExprPtr e = conditional();
    --depth_;
    return e;
  }
  bool at_end() const { return t_[i_].kind == Token::Kind::end; }
  bool is_name(const char* n) const { return t_[i_].kind == Token::Kind::name && t_[i_].text == n; }
  bool is_op(const char* o) const { return t_[i_].kind == Token::Kind::op && t_[i_].text == o; }
  std::string take_name(const char* what) {
    if (t_[i_].kind != Token::Kind::name) error(std::string("expected ") + what);
    return t_[i_++].text;
  }
  void expect_op(const char* o) {
    if (!is_op(o)) error(std::string("expected '") + o + "'");
    ++i_;
  }
  void expect_end() {
    if (!at_end()) error("unexpected '" + describe(t_[i_]) + "'");
  }
  [[noreturn]] void error(const std::string& what) const { fail(name_, line_, what); }

 private:
  static std::string describe(const Token& t) {
    if (t.kind == Token::Kind::string) return t.value.get<std::string>();
    return t.text;
  }
  ExprPtr node(Expr::Kind kind) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line_;
    return e;
  }
  ExprPtr binary(std::string op, ExprPtr a, ExprPtr b) {
    ExprPtr e = node(Expr::Kind::binary);
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }
  ExprPtr conditional() {
    ExprPtr value = or_expr();
    if (!is_name("if")) return value;
    ++i_;
    ExprPtr condition = or_expr();
    ExprPtr otherwise;
    if (is_name("else")) {
      ++i_;
      otherwise = conditional();
    }
    ExprPtr e = node(Expr::Kind::conditional);
    e->args.push_back(std::move(condition));
    e->args.push_back(std::move(value));
    e->args.push_back(std::move(otherwise));
    return e;
  }
  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (is_name("or")) {
      ++i_;
      e = binary("or", std::move(e), and_expr());
    }
    return e;
  }
  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (is_name("and")) {
      ++i_;
      e = binary("and", std::move(e), not_expr());
    }
    return e;
  }
  ExprPtr not_expr() {
    if (is_name("not")) {
      if (++depth_ > kMaxNesting) error("expressions nested deeper than " + std::to_string(kMaxNesting));
      ++i_;
      ExprPtr e = node(Expr::Kind::unary);
      e->name = "not";
      e->args.push_back(not_expr());
      return e;
    }
    return compare();
  }
  ExprPtr compare() {
    ExprPtr e = math1();
    for (;;) {
      if (is_op("==") || is_op("!=") || is_op("<") || is_op(">") || is_op("<=") || is_op(">=")) {
        const std::string op = t_[i_++].text;
        e = binary(op, std::move(e), math1());
      } else if (is_name("in")) {
        ++i_;
        e = binary("in", std::move(e), math1());
      } else if (is_name("not") && t_[i_ + 1].kind == Token::Kind::name && t_[i_ + 1].text == "in") {
        i_ += 2;
        e = binary("not in", std::move(e), math1());
      } else {
        return e;
      }
    }
  }
  ExprPtr math1() {
    ExprPtr e = concat();
    while (is_op("+") || is_op("-")) {
      const std::string op = t_[i_++].text;
      e = binary(op, std::move(e), concat());
    }
    return e;
  }
  ExprPtr concat() {
    ExprPtr e = math2();
    while (is_op("~")) {
      ++i_;
      e = binary("~", std::move(e), math2());
    }
    return e;
  }
  ExprPtr math2() {
    ExprPtr e = unary();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = t_[i_++].text;
      e = binary(op, std::move(e), unary());
    }
    return e;
  }
  ExprPtr unary() {
    if (is_op("-") || is_op("+")) {
      if (++depth_ > kMaxNesting) error("expressions nested deeper than " + std::to_string(kMaxNesting));
      const std::string op = t_[i_++].text;
      ExprPtr e = node(Expr::Kind::unary);
      e->name = op;
      e->args.push_back(unary());
      return e;
    }
    return filters(postfix(primary()));
  }
  void call_arguments(Expr& e) {
    expect_op("(");
    while (!is_op(")")) {
      if (t_[i_].kind == Token::Kind::name && t_[i_ + 1].kind == Token::Kind::op && t_[i_ + 1].text == "=") {
        std::string key = t_[i_].text;
        i_ += 2;
        e.kwargs.emplace_back(std::move(key), expression());
      } else {
        e.args.push_back(expression());
      }
      if (!is_op(",")) break;
      ++i_;
    }
    expect_op(")");
  }
  ExprPtr filters(ExprPtr e) {
    for (;;) {
      if (is_op("|")) {
        ++i_;
        ExprPtr f = node(Expr::Kind::filter);
        f->name = take_name("a filter name after '|'");
        f->args.push_back(std::move(e));
        if (is_op("(")) call_arguments(*f);
        e = std::move(f);
      } else if (is_name("is")) {
        ++i_;
        ExprPtr test = node(Expr::Kind::test);
        if (is_name("not")) {
          ++i_;
          test->negated = true;
        }
        // `none`, `true` and `false` are names of tests here.
        test->name = take_name("a test name after 'is'");
        test->args.push_back(std::move(e));
        if (is_op("(")) call_arguments(*test);
        e = std::move(test);
      } else {
        return e;
      }
    }
  }
  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      if (is_op(".")) {
        ++i_;
        ExprPtr a = node(Expr::Kind::attribute);
        a->name = take_name("an attribute name after '.'");
        a->args.push_back(std::move(e));
        e = std::move(a);
      } else if (is_op("[")) {
        ++i_;
        ExprPtr parts[3];
        bool has[3] = {false, false, false};
        bool slice = false;
        for (int part = 0; part < 3; ++part) {
          if (!is_op(":") && !is_op("]")) {
            parts[part] = expression();
            has[part] = true;
          }
          if (is_op(":") && part < 2) {
            ++i_;
            slice = true;
            continue;
          }
          break;
        }
        expect_op("]");
        ExprPtr s = node(slice ? Expr::Kind::slice : Expr::Kind::subscript);
        s->args.push_back(std::move(e));
        for (int part = 0; part < 3; ++part) {
          s->has[part] = has[part];
          s->args.push_back(std::move(parts[part]));
        }
        if (!slice && !has[0]) error("an empty subscript []");
        e = std::move(s);
      } else if (is_op("(")) {
        ExprPtr c = node(Expr::Kind::call);
        c->args.push_back(std::move(e));
        call_arguments(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }
  ExprPtr primary() {
    const Token& t = t_[i_];
    if (t.kind == Token::Kind::number || t.kind == Token::Kind::string) {
      ++i_;
      ExprPtr e = node(Expr::Kind::literal);
      e->literal = t.value;
      // Adjacent string literals join, as in Python.
      while (t.kind == Token::Kind::string && t_[i_].kind == Token::Kind::string)
        e->literal = e->literal.get<std::string>() + t_[i_++].value.get<std::string>();
      return e;
    }
    if (t.kind == Token::Kind::name) {
      ++i_;
      ExprPtr e = node(Expr::Kind::literal);
      if (t.text == "true" || t.text == "True") e->literal = true;
      else if (t.text == "false" || t.text == "False") e->literal = false;
      else if (t.text == "none" || t.text == "None") e->literal = nullptr;
      else {
        e->kind = Expr::Kind::name;
        e->name = t.text;
      }
      return e;
    }
    if (is_op("(")) {
      ++i_;
      ExprPtr e = expression();
      if (is_op(",")) error("tuples are not supported");
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      ++i_;
      ExprPtr e = node(Expr::Kind::list);
      while (!is_op("]")) {
        e->args.push_back(expression());
        if (!is_op(",")) break;
        ++i_;
      }
      expect_op("]");
      return e;
    }
    if (is_op("{")) {
      ++i_;
      ExprPtr e = node(Expr::Kind::dict);
      while (!is_op("}")) {
        e->args.push_back(expression());
        expect_op(":");
        e->args.push_back(expression());
        if (!is_op(",")) break;
        ++i_;
      }
      expect_op("}");
      return e;
    }
    error(t.kind == Token::Kind::end ? "an expression is missing" : "unexpected '" + describe(t) + "'");
  }

  std::vector<Token> t_;
  std::size_t i_ = 0;
  const std::string& name_;
  int line_;
  int depth_ = 0;
};

class StmtParser {
 public:
  StmtParser(std::vector<Piece> pieces, const std::string& name) : p_(std::move(pieces)), name_(name) {}

  Body parse_all() {
    Body body = parse_until({});
    if (i_ < p_.size()) fail(name_, p_[i_].line, "'" + keyword(p_[i_]) + "' without its opening statement");
    return body;
  }

 private:
  static std::string keyword(const Piece& p) {
    std::istringstream s(p.content);
    std::string word;
    s >> word;
    return word;
  }
  // Parses statements until a statement piece whose keyword is one of `ends` (left unconsumed).
  Body parse_until(const std::vector<std::string>& ends) {
    Body body;
    while (i_ < p_.size()) {
      const Piece& p = p_[i_];
      if (p.kind == Piece::Kind::text) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::text;
        s->text = p.content;
        s->line = p.line;
        body.push_back(std::move(s));
        ++i_;
        continue;
      }
      if (p.kind == Piece::Kind::output) {
        ExprParser e(lex_expression(p.content, name_, p.line), name_, p.line);
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::output;
        s->line = p.line;
        s->expr = e.expression();
        e.expect_end();
        body.push_back(std::move(s));
        ++i_;
        continue;
      }
      const std::string word = keyword(p);
      if (std::find(ends.begin(), ends.end(), word) != ends.end()) return body;
      body.push_back(statement(p, word));
    }
    if (!ends.empty()) fail(name_, p_.empty() ? 1 : p_.back().line, "the template ends before '" + ends.back() + "'");
    return body;
  }

  std::unique_ptr<Stmt> statement(const Piece& p, const std::string& word) {
    if (++depth_ > kMaxNesting) fail(name_, p.line, "statements nested deeper than " + std::to_string(kMaxNesting));
    struct Leave {
      int& depth;
      ~Leave() { --depth; }
    } leave{depth_};
    auto s = std::make_unique<Stmt>();
    s->line = p.line;
    ExprParser e(lex_expression(p.content, name_, p.line), name_, p.line);
    e.take_name("a statement");
    ++i_;
    if (word == "if") {
      s->kind = Stmt::Kind::if_;
      ExprPtr condition = e.expression();
      e.expect_end();
      for (;;) {
        Body branch = parse_until({"elif", "else", "endif"});
        s->branches.emplace_back(std::move(condition), std::move(branch));
        const Piece& next = p_[i_];
        const std::string k = keyword(next);
        ExprParser n(lex_expression(next.content, name_, next.line), name_, next.line);
        n.take_name("a statement");
        ++i_;
        if (k == "elif") {
          condition = n.expression();
          n.expect_end();
          continue;
        }
        n.expect_end();
        if (k == "else") {
          s->else_body = parse_until({"endif"});
          ++i_;
        }
        return s;
      }
    }
    if (word == "for") {
      s->kind = Stmt::Kind::for_;
      s->targets.push_back(e.take_name("a loop variable"));
      while (e.is_op(",")) {
        e.expect_op(",");
        s->targets.push_back(e.take_name("a loop variable"));
      }
      if (!e.is_name("in")) e.error("expected 'in' in a for statement");
      e.take_name("in");
      s->expr = e.expression();
      if (e.is_name("if") || e.is_name("recursive")) e.error("for ... if and recursive loops are not supported");
      e.expect_end();
      s->body = parse_until({"else", "endfor"});
      if (keyword(p_[i_]) == "else") {
        ++i_;
        s->else_body = parse_until({"endfor"});
      }
      ++i_;
      return s;
    }
    if (word == "set") {
      s->kind = Stmt::Kind::set;
      s->targets.push_back(e.take_name("a variable to set"));
      if (e.is_op(".")) {
        e.expect_op(".");
        s->targets.push_back(e.take_name("an attribute to set"));
      }
      if (!e.is_op("=")) e.error("a block {% set %} ... {% endset %} is not supported (only set NAME = value)");
      e.expect_op("=");
      s->expr = e.expression();
      e.expect_end();
      return s;
    }
    if (word == "break" || word == "continue") {
      e.expect_end();
      s->kind = word == "break" ? Stmt::Kind::break_ : Stmt::Kind::continue_;
      return s;
    }
    if (word == "generation") {  // transformers' assistant-mask markers: their body renders as is
      e.expect_end();
      s->kind = Stmt::Kind::if_;
      auto yes = std::make_unique<Expr>();
      yes->kind = Expr::Kind::literal;
      yes->literal = true;
      s->branches.emplace_back(std::move(yes), parse_until({"endgeneration"}));
      ++i_;
      return s;
    }
    for (const char* closing : {"elif", "else", "endif", "endfor", "endgeneration"})
      if (word == closing) fail(name_, p.line, "'" + word + "' without its opening statement");
    fail(name_, p.line, "the statement '" + word + "' is not supported (if, for, set, break, continue, generation)");
  }

  std::vector<Piece> p_;
  std::size_t i_ = 0;
  const std::string& name_;
  int depth_ = 0;
};

// ---- rendering ----------------------------------------------------------------------------------

struct Scope {
  std::map<std::string, Value, std::less<>> vars;
  Scope* parent = nullptr;
};

enum class Flow { normal, break_, continue_ };

class Renderer {
 public:
  Renderer(const std::string& name, std::string& out) : name_(name), out_(out) {}

  Flow run(const Body& body, Scope& scope) {
    for (const auto& s : body) {
      const Flow f = run(*s, scope);
      if (f != Flow::normal) return f;
    }
    return Flow::normal;
  }

 private:
  [[noreturn]] void error(int line, const std::string& what) const { fail(name_, line, what); }

  Flow run(const Stmt& s, Scope& scope) {
    switch (s.kind) {
      case Stmt::Kind::text:
        out_ += s.text;
        check_output(s.line);
        return Flow::normal;
      case Stmt::Kind::output: {
        const Value v = eval(*s.expr, scope);
        if (!v.undefined) out_ += v.ns ? std::string("<Namespace>") : python_str(v.json);
        check_output(s.line);
        return Flow::normal;
      }
      case Stmt::Kind::if_:
        for (const auto& [condition, body] : s.branches)
          if (truthy(eval(*condition, scope))) return run(body, scope);
        return run(s.else_body, scope);
      case Stmt::Kind::for_: return run_for(s, scope);
      case Stmt::Kind::set: {
        Value v = eval(*s.expr, scope);
        if (s.targets.size() == 1) {
          scope.vars[s.targets[0]] = std::move(v);
          return Flow::normal;
        }
        const Value target = lookup(s.targets[0], scope);
        if (!target.ns) error(s.line, "set " + s.targets[0] + "." + s.targets[1] + ": " + s.targets[0] + " is not a namespace()");
        (*target.ns)[s.targets[1]] = v.ns ? *v.ns : v.json;
        return Flow::normal;
      }
      case Stmt::Kind::break_: return Flow::break_;
      case Stmt::Kind::continue_: return Flow::continue_;
    }
    return Flow::normal;
  }

  Flow run_for(const Stmt& s, Scope& scope) {
    const Value iterable = eval(*s.expr, scope);
    std::vector<Json> items;
    const Json& data = iterable.data();
    if (iterable.undefined || data.is_null()) error(s.line, "for: the loop runs over " + std::string(type_name(iterable)));
    if (data.is_array()) items.assign(data.begin(), data.end());
    else if (data.is_object())
      for (const auto& [k, v] : data.items()) items.push_back(k);
    else if (data.is_string())
      for (char c : data.get<std::string>()) items.push_back(std::string(1, c));
    else error(s.line, std::string("for: a ") + type_name(iterable) + " is not iterable");
    if (items.empty()) {
      Scope inner{{}, &scope};
      return run(s.else_body, inner) == Flow::break_ ? Flow::normal : Flow::normal;
    }
    const auto n = static_cast<std::int64_t>(items.size());
    for (std::int64_t i = 0; i < n; ++i) {
      if (++iterations_ > kMaxIterations) error(s.line, "the loops ran more than " + std::to_string(kMaxIterations) + " times");
      Scope inner{{}, &scope};
      const Json& item = items[static_cast<std::size_t>(i)];
      if (s.targets.size() == 1) {
        inner.vars[s.targets[0]] = Value::of(item);
      } else {
        if (!item.is_array() || item.size() != s.targets.size())
          error(s.line, "for: an item does not unpack into " + std::to_string(s.targets.size()) + " names");
        for (std::size_t t = 0; t < s.targets.size(); ++t) inner.vars[s.targets[t]] = Value::of(item[t]);
      }
      inner.vars["loop"] = Value::of(Json{{"index0", i},
                                          {"index", i + 1},
                                          {"revindex", n - i},
                                          {"revindex0", n - i - 1},
                                          {"first", i == 0},
                                          {"last", i == n - 1},
                                          {"length", n}});
      if (run(s.body, inner) == Flow::break_) break;
    }
    return Flow::normal;
  }

  Value lookup(std::string_view name, const Scope& scope) const {
    for (const Scope* s = &scope; s != nullptr; s = s->parent)
      if (const auto it = s->vars.find(name); it != s->vars.end()) return it->second;
    return Value::missing();
  }

  static std::int64_t as_int(const Value& v, int line, const Renderer& r, const char* what) {
    if (!v.data().is_number_integer() && !v.data().is_number_unsigned()) r.error(line, std::string(what) + " is not an integer");
    return v.data().get<std::int64_t>();
  }

  Value member(const Value& base, const Json& key, int line, const std::string& shown) const {
    if (base.undefined) error(line, "'" + shown + "': the value it is taken from is undefined");
    const Json& d = base.data();
    if (d.is_object()) {
      if (!key.is_string()) return Value::missing();
      const auto it = d.find(key.get<std::string>());
      return it == d.end() ? Value::missing() : Value::of(*it);
    }
    if (d.is_array() || d.is_string()) {
      if (!key.is_number_integer()) return Value::missing();
      const auto size = static_cast<std::int64_t>(d.is_array() ? d.size() : d.get_ref<const std::string&>().size());
      std::int64_t i = key.get<std::int64_t>();
      if (i < 0) i += size;
      if (i < 0 || i >= size) return Value::missing();
      return d.is_array() ? Value::of(d[static_cast<std::size_t>(i)])
                          : Value::of(std::string(1, d.get_ref<const std::string&>()[static_cast<std::size_t>(i)]));
    }
    return Value::missing();
  }

  Value eval(const Expr& e, const Scope& scope) {
    switch (e.kind) {
      case Expr::Kind::literal: return Value::of(e.literal);
      case Expr::Kind::name: return lookup(e.name, scope);
      case Expr::Kind::attribute: return member(eval(*e.args[0], scope), Json(e.name), e.line, "." + e.name);
      case Expr::Kind::subscript: return member(eval(*e.args[0], scope), eval(*e.args[1], scope).data(), e.line, "[...]");
      case Expr::Kind::slice: return slice(e, scope);
      case Expr::Kind::list: {
        Json list = Json::array();
        for (const auto& a : e.args) list.push_back(eval(*a, scope).data());
        return Value::of(std::move(list));
      }
      case Expr::Kind::dict: {
        Json dict = Json::object();
        for (std::size_t i = 0; i + 1 < e.args.size(); i += 2) {
          const Value k = eval(*e.args[i], scope);
          if (!k.data().is_string()) error(e.line, "dict keys must be strings");
          dict[k.data().get<std::string>()] = eval(*e.args[i + 1], scope).data();
        }
        return Value::of(std::move(dict));
      }
      case Expr::Kind::conditional:
        if (truthy(eval(*e.args[0], scope))) return eval(*e.args[1], scope);
        return e.args[2] ? eval(*e.args[2], scope) : Value::missing();
      case Expr::Kind::unary: {
        const Value v = eval(*e.args[0], scope);
        if (e.name == "not") return Value::of(!truthy(v));
        if (!v.data().is_number()) error(e.line, "unary " + e.name + " on a " + type_name(v));
        if (e.name == "+") return v;
        if (v.data().is_number_float()) return Value::of(-v.data().get<double>());
        const std::int64_t n = v.data().get<std::int64_t>();
        if (n == std::numeric_limits<std::int64_t>::min()) error(e.line, "integer overflow");
        return Value::of(-n);
      }
      case Expr::Kind::binary: return binary(e, scope);
      case Expr::Kind::test: return Value::of(test(e, scope) != e.negated);
      case Expr::Kind::filter: return filter(e, scope);
      case Expr::Kind::call: return call(e, scope);
    }
    return Value::missing();
  }

  Value slice(const Expr& e, const Scope& scope) {
    const Value base = eval(*e.args[0], scope);
    const Json& d = base.data();
    if (!d.is_array() && !d.is_string()) error(e.line, std::string("slicing a ") + type_name(base));
    const auto size = static_cast<std::int64_t>(d.is_array() ? d.size() : d.get_ref<const std::string&>().size());
    std::int64_t part[3] = {0, 0, 1};
    for (int i = 0; i < 3; ++i)
      if (e.has[i]) part[i] = as_int(eval(*e.args[static_cast<std::size_t>(i) + 1], scope), e.line, *this, "a slice bound");
    const std::int64_t step = part[2];
    if (step == 0) error(e.line, "a slice step of 0");
    auto clamp = [&](std::int64_t v, bool given, bool is_start) {
      if (!given) return step > 0 ? (is_start ? 0 : size) : (is_start ? size - 1 : -1);
      if (v < 0) v += size;
      if (step > 0) return std::clamp<std::int64_t>(v, 0, size);
      return std::clamp<std::int64_t>(v, -1, size - 1);
    };
    const std::int64_t start = clamp(part[0], e.has[0], true), stop = clamp(part[1], e.has[1], false);
    Json list = Json::array();
    std::string text;
    for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (d.is_array()) list.push_back(d[static_cast<std::size_t>(i)]);
      else text += d.get_ref<const std::string&>()[static_cast<std::size_t>(i)];
    }
    return d.is_array() ? Value::of(std::move(list)) : Value::of(std::move(text));
  }

  static bool equal(const Value& a, const Value& b) {
    if (a.undefined || b.undefined) return a.undefined && b.undefined;
    const Json &x = a.data(), &y = b.data();
    if (x.is_number() && y.is_number()) return x.get<double>() == y.get<double>();
    return x == y;
  }

  Value binary(const Expr& e, const Scope& scope) {
    const std::string& op = e.name;
    if (op == "and") {
      Value a = eval(*e.args[0], scope);
      return truthy(a) ? eval(*e.args[1], scope) : a;
    }
    if (op == "or") {
      Value a = eval(*e.args[0], scope);
      return truthy(a) ? a : eval(*e.args[1], scope);
    }
    const Value a = eval(*e.args[0], scope), b = eval(*e.args[1], scope);
    const Json &x = a.data(), &y = b.data();
    if (op == "==") return Value::of(equal(a, b));
    if (op == "!=") return Value::of(!equal(a, b));
    if (op == "in" || op == "not in") {
      bool found = false;
      if (b.undefined || y.is_null() || y.is_number() || y.is_boolean())
        error(e.line, std::string("'in': a ") + type_name(b) + " is not a container");
      if (y.is_string()) {
        if (!x.is_string()) error(e.line, "'in' a string needs a string on its left");
        found = y.get_ref<const std::string&>().find(x.get_ref<const std::string&>()) != std::string::npos;
      } else if (y.is_array()) {
        found = std::any_of(y.begin(), y.end(), [&](const Json& v) { return equal(Value::of(v), a); });
      } else if (y.is_object()) {
        found = x.is_string() && y.contains(x.get<std::string>());
      }
      return Value::of(op == "in" ? found : !found);
    }
    if (op == "~") {
      auto text = [](const Value& v) { return v.undefined ? std::string() : python_str(v.data()); };
      std::string joined = text(a) + text(b);
      check_size(joined.size(), e.line);
      return Value::of(std::move(joined));
    }
    if (op == "+" && x.is_string() && y.is_string()) {
      check_size(x.get_ref<const std::string&>().size() + y.get_ref<const std::string&>().size(), e.line);
      return Value::of(x.get<std::string>() + y.get<std::string>());
    }
    if (op == "+" && x.is_array() && y.is_array()) {
      check_size(x.size() + y.size(), e.line);
      Json list = x;
      for (const Json& v : y) list.push_back(v);
      return Value::of(std::move(list));
    }
    if (!x.is_number() || !y.is_number() || a.undefined || b.undefined)
      error(e.line, "'" + op + "' between a " + type_name(a) + " and a " + type_name(b));
    const bool integers = !x.is_number_float() && !y.is_number_float();
    if (op == "<") return Value::of(x.get<double>() < y.get<double>());
    if (op == ">") return Value::of(x.get<double>() > y.get<double>());
    if (op == "<=") return Value::of(x.get<double>() <= y.get<double>());
    if (op == ">=") return Value::of(x.get<double>() >= y.get<double>());
    if (integers && op != "/") {
      const std::int64_t p = x.get<std::int64_t>(), q = y.get<std::int64_t>();
      std::int64_t r = 0;
      if (op == "+" || op == "-" || op == "*") {
        const bool overflow = op == "+" ? __builtin_add_overflow(p, q, &r)
                              : op == "-" ? __builtin_sub_overflow(p, q, &r)
                                          : __builtin_mul_overflow(p, q, &r);
        if (overflow) error(e.line, "integer overflow in '" + op + "'");
        return Value::of(r);
      }
      if (q == 0) error(e.line, "division by zero");
      if (q == -1 && p == std::numeric_limits<std::int64_t>::min()) error(e.line, "integer overflow in '" + op + "'");
      const std::int64_t floor_div = p / q - ((p % q != 0) && ((p < 0) != (q < 0)));
      if (op == "//") return Value::of(floor_div);
      if (op == "%") return Value::of(p - floor_div * q);
    }
    const double p = x.get<double>(), q = y.get<double>();
    if (op == "+") return Value::of(p + q);
    if (op == "-") return Value::of(p - q);
    if (op == "*") return Value::of(p * q);
    if (q == 0) error(e.line, "division by zero");
    if (op == "/") return Value::of(p / q);
    if (op == "//") return Value::of(std::floor(p / q));
    return Value::of(p - std::floor(p / q) * q);
  }

  bool test(const Expr& e, const Scope& scope) {
    const Value v = eval(*e.args[0], scope);
    const Json& d = v.data();
    const std::string& t = e.name;
    if (t == "defined") return !v.undefined;
    if (t == "undefined") return v.undefined;
    if (t == "none") return !v.undefined && d.is_null();
    if (t == "string") return !v.undefined && d.is_string();
    if (t == "number") return !v.undefined && d.is_number();
    if (t == "integer") return !v.undefined && (d.is_number_integer() || d.is_number_unsigned());
    if (t == "float") return !v.undefined && d.is_number_float();
    if (t == "boolean") return !v.undefined && d.is_boolean();
    if (t == "true") return !v.undefined && d.is_boolean() && d.get<bool>();
    if (t == "false") return !v.undefined && d.is_boolean() && !d.get<bool>();
    if (t == "mapping") return v.ns || (!v.undefined && d.is_object());
    if (t == "sequence" || t == "iterable") return !v.undefined && (d.is_array() || d.is_string() || d.is_object());
    if (t == "even" || t == "odd") {
      const std::int64_t n = as_int(v, e.line, *this, "the value tested");
      return (n % 2 == 0) == (t == "even");
    }
    error(e.line, "the test 'is " + t + "' is not supported");
  }

  std::string text_of(const Value& v, int line, const char* what) const {
    if (!v.data().is_string() || v.undefined) error(line, std::string(what) + " is a " + type_name(v) + ", not a string");
    return v.data().get<std::string>();
  }

  Value filter(const Expr& e, const Scope& scope) {
    const Value v = eval(*e.args[0], scope);
    const Json& d = v.data();
    const std::string& f = e.name;
    auto arg = [&](std::size_t i) { return i + 1 < e.args.size() ? eval(*e.args[i + 1], scope) : Value::missing(); };
    if (f == "length" || f == "count") {
      if (d.is_string()) return Value::of(static_cast<std::int64_t>(d.get_ref<const std::string&>().size()));
      if (d.is_array() || d.is_object()) return Value::of(static_cast<std::int64_t>(d.size()));
      error(e.line, std::string("length of a ") + type_name(v));
    }
    if (f == "tojson") {
      int indent = -1;
      for (const auto& [key, value] : e.kwargs)
        if (key == "indent") indent = static_cast<int>(as_int(eval(*value, scope), e.line, *this, "tojson's indent"));
      if (v.undefined) error(e.line, "tojson of an undefined value");
      std::string text = python_json(d, indent);
      check_size(text.size(), e.line);
      return Value::of(std::move(text));
    }
    if (f == "trim") {
      const std::string s = text_of(v, e.line, "trim's value");
      const std::size_t a = s.find_first_not_of(" \t\r\n\f\v");
      return Value::of(a == std::string::npos ? std::string() : s.substr(a, s.find_last_not_of(" \t\r\n\f\v") - a + 1));
    }
    if (f == "lower" || f == "upper") {
      std::string s = text_of(v, e.line, "the filtered value");
      for (char& c : s) c = static_cast<char>(f == "lower" ? std::tolower(static_cast<unsigned char>(c)) : std::toupper(static_cast<unsigned char>(c)));
      return Value::of(s);
    }
    if (f == "string") return Value::of(v.undefined ? std::string() : python_str(d));
    if (f == "default" || f == "d") {
      const bool boolean = e.args.size() > 2 && truthy(arg(1));
      if (v.undefined || (boolean && !truthy(v))) return arg(0).undefined ? Value::of(std::string()) : arg(0);
      return v;
    }
    if (f == "first" || f == "last") {
      if (!d.is_array() || d.empty()) return Value::missing();
      return Value::of(f == "first" ? d.front() : d.back());
    }
    if (f == "join") {
      const std::string sep = e.args.size() > 1 ? text_of(arg(0), e.line, "join's separator") : std::string();
      if (!d.is_array()) error(e.line, std::string("join of a ") + type_name(v));
      std::string out;
      for (std::size_t i = 0; i < d.size(); ++i) {
        out += (i ? sep : "") + python_str(d[i]);
        check_size(out.size(), e.line);
      }
      return Value::of(out);
    }
    if (f == "list") {
      if (d.is_array()) return v;
      Json list = Json::array();
      if (d.is_string())
        for (char c : d.get<std::string>()) list.push_back(std::string(1, c));
      else if (d.is_object())
        for (const auto& [k, x] : d.items()) list.push_back(k);
      else error(e.line, std::string("list of a ") + type_name(v));
      return Value::of(std::move(list));
    }
    if (f == "items") return dict_items(v, e.line);
    error(e.line, "the filter '" + f + "' is not supported");
  }

  Value dict_items(const Value& v, int line) const {
    if (!v.data().is_object()) error(line, std::string("items() of a ") + type_name(v));
    Json list = Json::array();
    for (const auto& [k, x] : v.data().items()) list.push_back(Json::array({k, x}));
    return Value::of(std::move(list));
  }

  Value call(const Expr& e, const Scope& scope) {
    const Expr& callee = *e.args[0];
    std::vector<Value> args;
    for (std::size_t i = 1; i < e.args.size(); ++i) args.push_back(eval(*e.args[i], scope));
    if (callee.kind == Expr::Kind::name) {
      if (callee.name == "namespace") {
        Value ns;
        ns.ns = std::make_shared<Json>(Json::object());
        for (const auto& [key, value] : e.kwargs) (*ns.ns)[key] = eval(*value, scope).data();
        return ns;
      }
      if (callee.name == "raise_exception")
        error(e.line, "the template raised an exception: " + (args.empty() ? std::string() : python_str(args[0].data())));
      if (callee.name == "range") {
        std::int64_t from = 0, to = 0, step = 1;
        if (args.size() == 1) to = as_int(args[0], e.line, *this, "range's bound");
        else if (args.size() >= 2) {
          from = as_int(args[0], e.line, *this, "range's start");
          to = as_int(args[1], e.line, *this, "range's stop");
          if (args.size() > 2) step = as_int(args[2], e.line, *this, "range's step");
        }
        if (step == 0 || (static_cast<double>(to) - static_cast<double>(from)) / static_cast<double>(step) > 100000)
          error(e.line, "range() of this size is not supported");
        Json list = Json::array();
        for (std::int64_t i = from; step > 0 ? i < to : i > to; i += step) list.push_back(i);
        return Value::of(std::move(list));
      }
      error(e.line, "the function '" + callee.name + "' is not supported (namespace, raise_exception, range)");
    }
    if (callee.kind != Expr::Kind::attribute) error(e.line, "only named functions and methods can be called");
    const Value self = eval(*callee.args[0], scope);
    const std::string& m = callee.name;
    const Json& d = self.data();
    if (!self.undefined && d.is_string()) return string_method(d.get<std::string>(), m, args, e.line);
    if (!self.undefined && d.is_object()) {
      if (m == "items") return dict_items(self, e.line);
      if (m == "keys" || m == "values") {
        Json list = Json::array();
        for (const auto& [k, x] : d.items()) list.push_back(m == "keys" ? Json(k) : x);
        return Value::of(std::move(list));
      }
      if (m == "get") {
        if (args.empty()) error(e.line, "get() needs a key");
        const Value found = member(self, args[0].data(), e.line, "get");
        return found.undefined ? (args.size() > 1 ? args[1] : Value::of(nullptr)) : found;
      }
    }
    error(e.line, "the method '" + m + "' of a " + type_name(self) + " is not supported");
  }

  Value string_method(const std::string& s, const std::string& m, const std::vector<Value>& args, int line) {
    auto text_arg = [&](std::size_t i, const char* what) { return text_of(args.at(i), line, what); };
    if (m == "startswith" || m == "endswith") {
      if (args.empty()) error(line, m + "() needs an argument");
      const std::string p = text_arg(0, "its prefix");
      const bool yes = m == "startswith" ? s.compare(0, p.size(), p) == 0 && s.size() >= p.size()
                                         : s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
      return Value::of(yes);
    }
    if (m == "strip" || m == "lstrip" || m == "rstrip") {
      const std::string chars = args.empty() || args[0].data().is_null() ? std::string(" \t\n\r\f\v") : text_arg(0, "the characters");
      std::size_t a = 0, b = s.size();
      if (m != "rstrip")
        while (a < b && chars.find(s[a]) != std::string::npos) ++a;
      if (m != "lstrip")
        while (b > a && chars.find(s[b - 1]) != std::string::npos) --b;
      return Value::of(s.substr(a, b - a));
    }
    if (m == "split") {
      Json parts = Json::array();
      if (args.empty() || args[0].data().is_null()) {  // runs of whitespace
        std::istringstream words(s);
        for (std::string w; words >> w;) parts.push_back(w);
        return Value::of(std::move(parts));
      }
      const std::string sep = text_arg(0, "the separator");
      if (sep.empty()) error(line, "split() with an empty separator");
      std::int64_t max_split = args.size() > 1 ? as_int(args[1], line, *this, "maxsplit") : -1;
      std::size_t at = 0;
      for (std::size_t next; max_split != 0 && (next = s.find(sep, at)) != std::string::npos; --max_split) {
        parts.push_back(s.substr(at, next - at));
        at = next + sep.size();
      }
      parts.push_back(s.substr(at));
      return Value::of(std::move(parts));
    }
    if (m == "lower" || m == "upper" || m == "title") {
      std::string out = s;
      bool start = true;
      for (char& c : out) {
        const auto u = static_cast<unsigned char>(c);
        if (m == "lower") c = static_cast<char>(std::tolower(u));
        else if (m == "upper") c = static_cast<char>(std::toupper(u));
        else {
          c = static_cast<char>(start ? std::toupper(u) : std::tolower(u));
          start = !std::isalpha(u);
        }
      }
      return Value::of(out);
    }
    if (m == "replace") {
      if (args.size() < 2) error(line, "replace() needs two arguments");
      const std::string from = text_arg(0, "replace's old text"), to = text_arg(1, "replace's new text");
      if (from.empty()) error(line, "replace() of an empty string");
      std::string out;
      std::size_t at = 0;
      for (std::size_t next; (next = s.find(from, at)) != std::string::npos; at = next + from.size()) {
        out += s.substr(at, next - at) + to;
        check_size(out.size(), line);
      }
      return Value::of(out + s.substr(at));
    }
    error(line, "the string method '" + m + "' is not supported");
  }

  // A string or list that a template builds may not pass the output's bound either.
  void check_size(std::size_t size, int line) {
    if (size > kMaxOutputBytes) error(line, "a value passed " + std::to_string(kMaxOutputBytes >> 20) + " MiB");
    work_ += size;
    if (work_ > kMaxWorkBytes) error(line, "the template built more than " + std::to_string(kMaxWorkBytes >> 20) + " MiB of text");
  }
  void check_output(int line) const {
    if (out_.size() > kMaxOutputBytes) error(line, "the rendered text passed " + std::to_string(kMaxOutputBytes >> 20) + " MiB");
  }

  const std::string& name_;
  std::string& out_;
  std::int64_t iterations_ = 0;
  std::size_t work_ = 0;
};

}  // namespace

ChatTemplate::ChatTemplate() = default;
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

ChatTemplate ChatTemplate::parse(std::string_view source, const std::string& name) {
  // What the template writes goes to the tokenizer, which takes strict UTF-8 only.
  std::size_t bad_at = 0;
  if (!valid_utf8(source, &bad_at)) {
    const auto line = 1 + std::count(source.begin(), source.begin() + static_cast<std::ptrdiff_t>(bad_at), '\n');
    fail(name, static_cast<int>(line), "the template is not valid UTF-8 (at byte " + std::to_string(bad_at) + ")");
  }
  ChatTemplate t;
  t.program_ = std::make_unique<TemplateProgram>();
  t.program_->name = name;
  StmtParser parser(split_pieces(source, name), name);
  t.program_->body = parser.parse_all();
  return t;
}

std::string ChatTemplate::render(const Json& context) const {
  std::string out;
  Scope globals;
  if (context.is_object())
    for (const auto& [k, v] : context.items()) globals.vars[k] = Value::of(v);
  Renderer renderer(program_->name, out);
  renderer.run(program_->body, globals);
  return out;
}

}  // namespace switchyard::text
