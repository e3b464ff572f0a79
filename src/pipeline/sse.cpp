#include "pipeline/sse.h"

namespace deepinfer::pipeline {

std::string FormatSse(std::span<const recipe::StreamEvent> events) {
  size_t size = 0;
  for (const recipe::StreamEvent& event : events) size += event.name.size() + event.json.size() + 16;
  std::string text;
  text.reserve(size);
  for (const recipe::StreamEvent& event : events) {
    if (!event.name.empty()) {
      text += "event: ";
      text += event.name;
      text += '\n';
    }
    text += "data: ";
    text += event.json;
    text += "\n\n";
  }
  return text;
}

}  // namespace deepinfer::pipeline
