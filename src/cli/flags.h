// The one argument parser of every `deepinfer` subcommand and `deepinfer bench` target: typed flags with
// their bounds declared next to the variable they fill, so that a value out of range, a missing value, an
// unknown option or invalid UTF-8 is one usage line and exit 2 before the command does anything.
//
//   std::string dir;  int64_t steps = 8;  bool stream = false;
//   Flags flags("bench model");
//   flags.Path("--model", &dir).Required();
//   flags.Int("--steps", &steps, 1, 1'000'000);
//   flags.Switch("--stream", &stream);
//   if (int rc = flags.Parse(args)) return rc;
//
// Syntax: `--name VALUE` or `--name=VALUE`; a value is taken as given even when it starts with '-' (so
// `--seed -1` is a range error, not an unknown option). Arguments not starting with '-' (and '-' itself,
// and everything after `--`) are positionals, accepted only where Positionals() declares them.
// Bounds: every string value and positional must be valid UTF-8 (they end up in JSON and in messages);
// integers are decimal, overflow-checked and within [min, max]; doubles finite and within [min, max];
// a list has at most max_count items. The length of one argument is bounded by the kernel (MAX_ARG_STRLEN,
// 128 KiB); values read from files are the commands' business.
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace deepinfer::cli {

class Flags {
 public:
  // `command` names the subcommand in messages ("tokenize", "bench model").
  explicit Flags(std::string command);

  // A string value (valid UTF-8). Path(): the same, and it must not be empty.
  Flags& String(std::string name, std::string* out);
  Flags& Path(std::string name, std::string* out);
  // A repeatable string flag: each occurrence appends.
  Flags& Strings(std::string name, std::vector<std::string>* out);
  // A flag without a value: its presence stores `value`.
  Flags& Switch(std::string name, bool* out, bool value = true);
  // A decimal integer in [min, max].
  template <std::integral T>
  Flags& Int(std::string name, T* out, T min, T max);
  // A finite number in [min, max].
  Flags& Double(std::string name, double* out, double min, double max);
  // The same, or the word `word`, which stores `word_value` ("auto" for a derived setting).
  Flags& DoubleOr(std::string name, double* out, double min, double max, std::string word, double word_value);
  // Comma-separated integers, each in [min, max], 1..max_count of them.
  Flags& IntList(std::string name, std::vector<int64_t>* out, int64_t min, int64_t max, size_t max_count = 64);
  // One of the named values; several names may map to one value (aliases). The message lists the names.
  template <typename T>
  Flags& Choice(std::string name, T* out, std::vector<std::pair<std::string, T>> choices);
  // Anything else: `parse` checks the (UTF-8-valid) value and stores it; its error message is shown after
  // the flag's name.
  Flags& Custom(std::string name, std::string value_name, std::function<Status(const std::string&)> parse);
  // The flag declared last must be given.
  Flags& Required();
  // Positional arguments, between min and max of them (max = SIZE_MAX for "any number").
  Flags& Positionals(std::string name, std::vector<std::string>* out, size_t min = 0,
                     size_t max = std::numeric_limits<size_t>::max());

  // 0 when every argument was understood and within bounds; otherwise prints the one-line usage error
  // (`deepinfer COMMAND: message (see 'deepinfer COMMAND --help')`) and returns 2.
  int Parse(const std::vector<std::string>& args);
  // The same check without printing: InvalidArgument with the message.
  Status Check(const std::vector<std::string>& args);

  // Whether the flag appeared on the command line (after Parse).
  bool given(std::string_view name) const;
  const std::string& command() const { return command_; }

 private:
  struct Spec {
    std::string name;
    bool takes_value = true;
    bool required = false;
    bool seen = false;
    std::function<Status(const std::string&)> apply;
  };
  Flags& Add(std::string name, bool takes_value, std::function<Status(const std::string&)> apply);
  Spec* Find(std::string_view name);
  // Decimal integers within [min, max] (messages name the range).
  static Status ParseSigned(const std::string& text, int64_t min, int64_t max, int64_t* out);
  static Status ParseUnsigned(const std::string& text, uint64_t min, uint64_t max, uint64_t* out);

  std::string command_;
  std::vector<Spec> specs_;
  std::string positional_name_;
  std::vector<std::string>* positionals_ = nullptr;
  size_t positional_min_ = 0, positional_max_ = 0;
};

// Usage errors and failures in the CLI's one-line format (also used by Flags::Parse).
std::string UsageLine(const std::string& command, const std::string& message);

// A byte count for people: "512 B", then two decimals of the largest binary unit that keeps the value at
// 1 or more ("1.50 KiB", up to PiB).
std::string HumanBytes(uint64_t bytes);

template <std::integral T>
Flags& Flags::Int(std::string name, T* out, T min, T max) {
  return Add(std::move(name), true, [out, min, max](const std::string& text) -> Status {
    if constexpr (std::is_signed_v<T>) {
      int64_t v = 0;
      DI_RETURN_IF_ERROR(ParseSigned(text, min, max, &v));
      *out = static_cast<T>(v);
    } else {
      uint64_t v = 0;
      DI_RETURN_IF_ERROR(ParseUnsigned(text, min, max, &v));
      *out = static_cast<T>(v);
    }
    return Status::Ok();
  });
}

template <typename T>
Flags& Flags::Choice(std::string name, T* out, std::vector<std::pair<std::string, T>> choices) {
  return Add(std::move(name), true, [out, choices = std::move(choices)](const std::string& text) -> Status {
    std::string names;
    for (const auto& [choice, value] : choices) {
      if (choice == text) {
        *out = value;
        return Status::Ok();
      }
      names += (names.empty() ? "" : ", ") + choice;
    }
    return Status::InvalidArgument("takes " + names + " (got '" + text + "')");
  });
}

}  // namespace deepinfer::cli
