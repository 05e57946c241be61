"""Tests of protocols.kv: the key-value service, its storages, its change feed and its thread pool."""
