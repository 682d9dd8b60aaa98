; swift
