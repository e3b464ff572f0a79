# A fixture for the layering_detects_violations test: mid is declared to use high, which the README forbids,
# and src/low/low.cpp includes high/ although low declares nothing.
set(DEEPINFER_DEPS_low "")
set(DEEPINFER_CLOSURE_low "")
set(DEEPINFER_DEPS_mid "low;high")
set(DEEPINFER_CLOSURE_mid "low;high")
set(DEEPINFER_DEPS_high "mid")
set(DEEPINFER_CLOSURE_high "mid;low")
set(DEEPINFER_COMPONENTS "low;mid;high")
set(DEEPINFER_PRESENT_COMPONENTS "low;mid;high")
