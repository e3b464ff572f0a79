#include "pipeline/json_body.h"

#include "core/json.h"

namespace deepinfer::pipeline {

JsonBody ParseJsonObject(std::string_view body) {
  JsonBody out;
  JsonLimits limits;
  limits.max_depth = kMaxBodyJsonDepth;
  auto parsed = ParseJson(body, limits);
  if (!parsed.ok()) {
    out.error = "We could not parse the JSON body of your request: " + parsed.status().message();
  } else if (!parsed->is_object()) {
    out.error = "the request body must be a JSON object";
  } else {
    out.value = std::move(*parsed);
  }
  return out;
}

}  // namespace deepinfer::pipeline
