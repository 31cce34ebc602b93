# Model/loading tests: engine_test(<file-name-without-.cpp>) per file.
engine_test(model-json)
engine_test(model-safetensors)
engine_test(model-config)
engine_test(model-forward)
engine_test(model-reference)
