# Executor tests: engine_test(<file-name-without-.cpp>) per file.
engine_test(kv-cache-test)
engine_test(scheduler-test)
engine_test(sampler-test)
engine_test(executor-basic)
engine_test(executor-kv-pressure)
engine_test(executor-lifecycle)
engine_test(executor-validation)
