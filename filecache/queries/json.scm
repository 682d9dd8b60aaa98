; json
